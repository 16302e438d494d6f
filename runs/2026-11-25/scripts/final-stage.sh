#!/usr/bin/env bash
# Stages .carry/final.txz for the last calls of a session, from the project
# root: both builds' binaries and nextest archives and the runner
# (2026-11-22/scripts/stage.sh), compressed with xz (gzip makes it 68 MB,
# over the 64 MiB a call carries). Unpack there with `tar xJf .carry/final.txz`.
set -euo pipefail
runs/2026-11-22/scripts/stage.sh
rm -f .carry/final.tgz .carry/final.txz
tar cf - .gpu | xz -6 -T0 > .carry/final.txz
du -sh .carry/final.txz
