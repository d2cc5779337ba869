#!/usr/bin/env python3
"""Power cuts on the emulated board: `powercut.py BOARD ELF [BOOTS] [SEED]`.

Boots the `powercut` firmware under QEMU with its flash in a host file
(`flash.bin`, 4 KiB, erased at the start), lets it stream and save for a
random 20 to 400 ms, and kills QEMU with SIGKILL (no shutdown of any kind);
then boots it again on the same file, BOOTS times. Every boot must restore
the last image the run before saved (`saved N`) or the one it was saving
when it died (`saving N`), in the state it was saved in; the first boot
finds the flash empty. Prints one line a boot and a verdict, exits 1 on
any other restore.
"""

import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time


def main() -> int:
    board, elf = sys.argv[1], os.path.abspath(sys.argv[2])
    boots = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    rng = random.Random(seed)
    folder = tempfile.mkdtemp(prefix="duplex-powercut-")
    with open(os.path.join(folder, "flash.bin"), "wb") as f:
        f.write(b"\xff" * 4096)
    cmd = ["qemu-system-arm", "-machine", board, "-nographic",
           "-semihosting-config", "enable=on,target=native", "-kernel", elf]
    allowed = {None}  # what the next boot may restore: (seq, state) or None
    cut_save = None  # the save the last kill cut short, if any
    failures = 0
    cut_kept = 0  # restores of the save the kill cut short
    for boot in range(1, boots + 1):
        out_path = os.path.join(folder, f"boot{boot}.out")
        with open(out_path, "wb") as out:
            p = subprocess.Popen(cmd, cwd=folder, stdout=out, stderr=subprocess.STDOUT)
            time.sleep(rng.uniform(0.02, 0.4))
            p.send_signal(signal.SIGKILL)
            p.wait()
        with open(out_path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        first = lines[0] if lines else ""
        m = re.fullmatch(r"boot: restored (\d+) (\w+)", first)
        if first == "boot: fresh":
            got = None
        elif m:
            got = (int(m.group(1)), m.group(2))
        else:
            # Killed before the boot line was out: nothing was saved either.
            print(f"boot {boot}: killed before it printed its boot line")
            continue
        ok = got in allowed
        failures += not ok
        cut_kept += ok and got is not None and got == cut_save
        saving = [(int(a), b) for a, b in re.findall(r"^saving (\d+) (\w+)$", "\n".join(lines), re.M)]
        saved = [int(a) for a in re.findall(r"^saved (\d+)$", "\n".join(lines), re.M)]
        print(f"boot {boot}: restored {got if got else 'nothing'} "
              f"({'ok' if ok else 'NOT one of ' + str(sorted(allowed, key=str))}); "
              f"{len(saved)} saves, killed {'during' if saving and (not saved or saving[-1][0] > saved[-1]) else 'between'} saves")
        # The next boot restores the last complete save, or the save cut.
        last_complete = next((s for s in reversed(saving) if saved and s[0] == saved[-1]), None)
        nxt = set()
        if last_complete is not None:
            nxt.add(last_complete)
        else:
            nxt |= {got}
        cut_save = None
        if saving and (not saved or saving[-1][0] > saved[-1]):
            nxt.add(saving[-1])
            cut_save = saving[-1]
        allowed = nxt
    print(f"powercut on {board}: {boots} boots after SIGKILL, "
          f"{boots - failures} restored the last complete image or the one being saved "
          f"({cut_kept} the one being saved)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
