#!/bin/bash
# Fresh machine (#10.1): `make test`/`make run` must build on the first run, when pkg-config
# knows none of the libraries until the deps step has installed them. A pkg-config shim first in
# PATH fails until a flag file exists; DEPS (the deps step, scripts/deps.sh by default) creates
# it. A copy of build/obj is relinked in a temp build dir, so only linking is repeated.
# Control: `make all` in the same setting must fail (the shim really hides the libraries).
set -u
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
[ -f build/libnasd.a ] || fail "build first (make all)"

TMP=$(mktemp -d /tmp/nasd-fresh-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/bin"
REAL=$(command -v pkg-config) || fail "pkg-config missing"
cat > "$TMP/bin/pkg-config" <<SH
#!/bin/sh
[ -e "$TMP/installed" ] || { echo "shim: package not found" >&2; exit 1; }
exec $REAL "\$@"
SH
chmod +x "$TMP/bin/pkg-config"
# the deps step (called with package names too, which it ignores): "installs" after 2 s
printf '#!/bin/sh\nsleep 2; touch "%s/installed"\n' "$TMP" > "$TMP/bin/deps"
chmod +x "$TMP/bin/deps"

# prepare DIR [SRC]: the compiled objects of SRC (build), without any linked program
prepare() {
  mkdir -p "$1"
  cp -a "${2:-build}/obj" "${2:-build}/libnasd.a" "$1"/
  cp -a "${2:-build}/.flags" "$1"/ 2>/dev/null   # the same flags after the deps step: nothing recompiles
  find "$1/obj" -name '*.d' -delete   # they name build/obj paths; not needed for a relink
}
unit=$(ls tests/unit/test_*.c | head -1); unit=$(basename "$unit" .c)

prepare "$TMP/control"
if PATH="$TMP/bin:$PATH" make --no-print-directory B="$TMP/control" DEPS=true FLAGS_STAMP= all >"$TMP/control.log" 2>&1; then
  fail "control: make all linked without pkg-config results; the check below would prove nothing"
fi
grep -q 'undefined reference' "$TMP/control.log" || { tail -5 "$TMP/control.log"; fail "control failed for another reason"; }
echo "control: without the libraries make all fails to link, as on a fresh machine"

for target in test; do   # test = deps, then build in a second make, then run-tests.sh (run and bench the same)
  rm -f "$TMP/installed"
  prepare "$TMP/$target"
  # (the deps step takes 2 s, so anything not waiting for it parses the Makefile too early)
  # make test also builds the ASan binaries (mk/asan.mk, in parallel with -j2): relinked
  # from a copy of build-asan when there is one, else that part is not checked here
  BA_ARG=BA="$TMP/$target-asan"
  if [ -f build-asan/libnasd.a ]; then prepare "$TMP/$target-asan" build-asan; cp -a build-asan/tools "$TMP/$target-asan/" 2>/dev/null
    find "$TMP/$target-asan/tools" -type f -perm -u+x -delete; else echo "note: no build-asan to copy; the ASan part builds from scratch"; fi
  # test runs run-tests.sh too: narrowed to no tests, so only the build is exercised here
  PATH="$TMP/bin:$PATH" INTEGRATION_ONLY=1 TESTS=__none__ \
    make --no-print-directory -j2 B="$TMP/$target" "$BA_ARG" DEPS="$TMP/bin/deps" $target >"$TMP/$target.log" 2>&1 ||
    { tail -20 "$TMP/$target.log"; fail "make $target failed on the first run"; }
  [ -x "$TMP/$target/nasd" ] || fail "make $target: no nasd binary"
  [ -x "$TMP/$target/tests/$unit" ] || fail "make $target: no unit test binary $unit"
  if grep -q '^test: asan' mk/*.mk 2>/dev/null; then
    [ -x "$TMP/$target-asan/nasd" ] || fail "make $target: no ASan nasd"
  fi
  "$TMP/$target/nasd" --help >/dev/null 2>&1 || "$TMP/$target/nasd" --version >/dev/null 2>&1 ||
    ldd "$TMP/$target/nasd" | grep -q jansson || fail "make $target: nasd does not run"
  echo "make $target: first run with the libraries installed by the deps step links nasd and the unit tests"
done
DEPS_RE='scripts/deps.sh|make .*deps'
grep -qE "$DEPS_RE" .ci/run && [ "$(grep -nE "$DEPS_RE" .ci/run | head -1 | cut -d: -f1)" -lt "$(grep -n 'make -j2 all' .ci/run | cut -d: -f1)" ] ||
  fail ".ci/run must install the packages (scripts/deps.sh or make deps) before make -j2 all"
echo "PASS: fresh-machine build sequence"
