#!/usr/bin/env bash
# Fetch onnxruntime's C headers (Debian unstable's libonnxruntime-dev) into build/deps/.
# The apt source line is derived from this machine's own apt configuration (first Debian
# mirror found, suite sid, component main); no mirror address is written anywhere.
# Exit codes: 0 ok (prints the include dir on stdout), 3 headers could not be fetched (with a
# one-line reason on stderr, naming the source without its address).
# For tests: REFDEV_APT_SOURCES_LIST and REFDEV_APT_SOURCES_PARTS replace /etc/apt/sources.list
# and /etc/apt/sources.list.d.
set -eu -o pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="${REFDEV_BUILD_DIR:-$here/build}"
deps="$build/deps"
pkg="${REFDEV_ORT_DEV_PACKAGE:-libonnxruntime-dev}"
suite="${REFDEV_APT_SUITE:-sid}"
sources_list="${REFDEV_APT_SOURCES_LIST:-/etc/apt/sources.list}"
sources_parts="${REFDEV_APT_SOURCES_PARTS:-/etc/apt/sources.list.d}"
source_name="the Debian mirror of this machine's apt sources"
uri=""

fail() { echo "fetch-headers.sh: cannot fetch onnxruntime headers: $(without_address "$*")" >&2; exit 3; }

# apt's messages quote the mirror's URL and host: name the source instead, so that the address
# does not travel into skip reasons, CI logs and reports.
without_address() {
    local text="$1" rest host
    if [ -n "$uri" ]; then
        rest="${uri#*://}"; rest="${rest%/}"
        host="${rest%%/*}"
        text="${text//"$uri"/$source_name}"
        text="${text//"$rest"/$source_name}"
        [ -z "$host" ] || text="${text//"$host"/$source_name}"
    fi
    # any other URL apt may quote (a redirect, a proxy)
    printf '%s' "$text" | sed -E -e "s#[A-Za-z][A-Za-z0-9+.-]*:/*($source_name)#\\1#g" -e "s#[A-Za-z][A-Za-z0-9+.-]*://[^ ]*#<an address>#g"
}

find_include() {
    local h
    h="$(find "$deps" -name onnxruntime_ep_c_api.h -print 2>/dev/null || true)"
    [ -n "$h" ] || return 1
    h="${h%%$'\n'*}"
    dirname "$h"
}

if inc="$(find_include)"; then echo "$inc"; exit 0; fi

command -v apt-get >/dev/null 2>&1 || fail "apt-get not found"
command -v dpkg >/dev/null 2>&1 || fail "dpkg not found"
command -v dpkg-deb >/dev/null 2>&1 || fail "dpkg-deb not found"

# --- derive "URI keyring" of the first Debian (non-security) mirror from the system config ---
derive_source() {
    local f
    # one-line format: deb [opts] URI suite comp...
    for f in "$sources_list" "$sources_parts"/*.list; do
        [ -f "$f" ] || continue
        awk '
            /^[[:space:]]*#/ {next}
            $1 == "deb" {
                i = 2; kr = ""
                if ($i ~ /^\[/) {
                    while (i <= NF) {
                        if ($i ~ /signed-by=/) { kr = $i; sub(/.*signed-by=/, "", kr); sub(/\].*/, "", kr) }
                        if ($i ~ /\]$/) { i++; break }
                        i++
                    }
                }
                uri = $i; s = $(i + 1)
                if (uri ~ /-security\/?$/ || s ~ /-security$/) next
                if (s ~ /^(buster|bullseye|bookworm|trixie|forky|duke|sid|stable|testing|unstable|oldstable)(-updates|-backports)?$/) {
                    print uri, kr; found = 1; exit
                }
            }' "$f" || true
    done
    # deb822 format
    for f in "$sources_parts"/*.sources; do
        [ -f "$f" ] || continue
        awk '
            function flush() {
                if (types ~ /(^|[[:space:]])deb([[:space:]]|$)/ && en != "no" && uri != "" && uri !~ /-security\/?$/ && suites !~ /-security/ &&
                    (kr ~ /debian-archive-keyring/ || suites ~ /(^|[[:space:]])(buster|bullseye|bookworm|trixie|forky|sid|stable|testing|unstable)([[:space:]]|-|$)/)) {
                    print uri, kr; done = 1
                }
                types = ""; uri = ""; suites = ""; kr = ""; en = ""
            }
            /^[[:space:]]*#/ {next}
            /^[[:space:]]*$/ { if (!done) flush(); next }
            {
                key = tolower($1); sub(/:$/, "", key)
                val = $0; sub(/^[^:]*:[[:space:]]*/, "", val)
                if (key == "types") types = val
                else if (key == "uris") { uri = val; sub(/[[:space:]].*/, "", uri) }
                else if (key == "suites") suites = val
                else if (key == "signed-by") kr = val
                else if (key == "enabled") en = tolower(val)
            }
            END { if (!done) flush() }' "$f" || true
    done
}

src="$(derive_source)"
src="${src%%$'\n'*}"
[ -n "$src" ] || fail "no Debian mirror found in $sources_list or $sources_parts/"
uri="${src%% *}"
keyring="${src#* }"
[ "$keyring" != "$src" ] || keyring=""
if [ -z "$keyring" ] || [ ! -r "$keyring" ]; then
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
fi
[ -r "$keyring" ] || fail "no Debian archive keyring at $keyring"

# --- private apt configuration ---
apt="$build/apt"
rm -rf "$apt"
mkdir -p "$apt/etc/sources.list.d" "$apt/etc/preferences.d" "$apt/lists/partial" \
         "$apt/cache/archives/partial" "$apt/dl" "$deps"
: > "$apt/status"
echo "deb [signed-by=$keyring] $uri $suite main" > "$apt/etc/sources.list"
: > "$apt/etc/preferences"
{
    echo "Dir::Etc::SourceList \"$apt/etc/sources.list\";"
    echo "Dir::Etc::SourceParts \"$apt/etc/sources.list.d\";"
    echo "Dir::Etc::Preferences \"$apt/etc/preferences\";"
    echo "Dir::Etc::PreferencesParts \"$apt/etc/preferences.d\";"
    echo "Dir::State::Lists \"$apt/lists\";"
    echo "Dir::State::status \"$apt/status\";"
    echo "Dir::Cache \"$apt/cache\";"
    echo "Dir::Cache::pkgcache \"\";"
    echo "Dir::Cache::srcpkgcache \"\";"
    echo "Acquire::Languages \"none\";"
    echo "APT::Get::List-Cleanup \"false\";"
    if [ "$(id -u)" = 0 ]; then echo "APT::Sandbox::User \"root\";"; fi
} > "$apt/apt.conf"
export APT_CONFIG="$apt/apt.conf"

log="$apt/log"
if ! apt-get -q update >"$log" 2>&1; then
    fail "apt-get update for suite $suite from $source_name failed ($(grep -E '^(E|W):' "$log" | tr '\n' ' ' | cut -c1-300))"
fi
if grep -q '^E:' "$log"; then
    fail "apt-get update for suite $suite from $source_name reported errors ($(grep '^E:' "$log" | tr '\n' ' ' | cut -c1-300))"
fi
if ! (cd "$apt/dl" && apt-get -q download "$pkg" >>"$log" 2>&1); then
    fail "apt-get download $pkg (suite $suite) from $source_name failed ($(grep -E '^(E|W):' "$log" | tr '\n' ' ' | cut -c1-300))"
fi

# apt-get download writes an epoch as %3a in the file name: pick the .deb by its Package field.
deb=""
for f in "$apt/dl"/*.deb; do
    [ -f "$f" ] || continue
    if [ "$(dpkg-deb -f "$f" Package)" = "$pkg" ]; then deb="$f"; break; fi
done
[ -n "$deb" ] || fail "apt-get download produced no .deb for $pkg"
ver="$(dpkg-deb -f "$deb" Version)"
dpkg -x "$deb" "$deps" || fail "dpkg -x $deb failed"
echo "$pkg $ver" > "$deps/VERSION"

inc="$(find_include)" || fail "$pkg $ver does not contain onnxruntime_ep_c_api.h"
echo "$inc"
