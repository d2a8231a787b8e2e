"""The worker process: runs one case, computes the copy matrix, serves requests."""
