#!/usr/bin/env bash
# Flash and stack of duplex-core in a firmware-shaped binary (this crate).
#
# Flash: the .text bytes the core adds (the same binary built without the
# core is the baseline), for the device and the default profile, at
# opt-level 3 and "s". Stack: the deepest frame among the binary's
# functions (the core's operations are inlined into them), read from each
# prologue in the disassembly: x86-64 frames of this host target, not a
# microcontroller's. (-Z emit-stack-sizes leaves its entries unrelocated in
# a final link here, so the prologues are the source.)
#
# Prints a markdown table; fails if a figure exceeds its ceiling, so a
# regression shows in CI.
set -euo pipefail
cd "$(dirname "$0")"

text() { size -A "$1" | awk '$1 == ".text" { print $2 }'; }
build() { # opt-level, features...
  local opt=$1; shift
  CARGO_PROFILE_RELEASE_OPT_LEVEL=$opt CARGO_TARGET_DIR=target/measure-$opt cargo build --release -q "$@"
  text "target/measure-$opt/release/duplex-no-std-check"
}

status=0
check() { # what, value, ceiling
  if [ "$2" -gt "$3" ]; then
    echo "REGRESSION: $1 is $2 bytes, above its ceiling of $3" >&2
    status=1
  fi
}

echo "| profile | opt-level | .text added by the core (bytes) |"
echo "|---|---|---:|"
for opt in 3 s; do
  base=$(build "$opt" --features without-core)
  device=$(( $(build "$opt") - base ))
  default=$(( $(build "$opt" --features default-profile) - base ))
  echo "| device | $opt | $device |"
  echo "| default | $opt | $default |"
  check "device .text at opt-level $opt" "$device" 28000
  check "default .text at opt-level $opt" "$default" 16000
done

if command -v python3 >/dev/null && command -v objdump >/dev/null; then
  echo
  echo "| profile | deepest stack frame (bytes, x86-64) | function |"
  echo "|---|---:|---|"
  for profile in device default; do
    features=()
    [ "$profile" = default ] && features=(--features default-profile)
    dir=target/measure-3
    CARGO_TARGET_DIR=$dir cargo build --release -q "${features[@]}"
    line=$(objdump -d -C --no-show-raw-insn "$dir/release/duplex-no-std-check" | python3 -c '
import re, sys
# A frame: the return address, the pushes of the prologue, and the
# stack pointer adjustment that follows them.
best, name, frame, prologue = (0, "?"), None, 8, False
for l in sys.stdin:
    m = re.match(r"^[0-9a-f]+ <(.+)>:$", l)
    if m:
        name, frame, prologue = m.group(1), 8, True
        continue
    if not prologue or name is None:
        continue
    if re.search(r"\bpush\s", l):
        frame += 8
    else:
        s = re.search(r"\bsub\s+\$0x([0-9a-f]+),%rsp", l)
        if s:
            frame += int(s.group(1), 16)
        prologue = False
        best = max(best, (frame, name))
print(best[0], best[1])
')
    set -- $line
    echo "| $profile | $1 | \`$2\` |"
    ceiling=4300
    [ "$profile" = default ] && ceiling=5200
    check "$profile stack frame" "$1" "$ceiling"
  done
fi
exit $status
