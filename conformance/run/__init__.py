"""Which worker runs what and when, and what a lost worker means: scheduler, pool, quarantine, journal."""
