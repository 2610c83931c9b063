#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu): Python
# and bubblewrap from the system, minigraph from this zip's repo/ in a virtual environment
# where the grader's sandbox user may run it (not under /root: docs/teaching.md).
set -euo pipefail
source_dir="$(cd "$(dirname "$0")" && pwd)"          # /autograder/source
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip bubblewrap >/dev/null
python3 -m venv /opt/minigraph-venv
/opt/minigraph-venv/bin/python -m pip install -q --upgrade pip
/opt/minigraph-venv/bin/python -m pip install -q -e "$source_dir/repo"
# The sandbox user reads the package, never the solutions or the private cases.
chmod -R go+rX /opt/minigraph-venv "$source_dir/repo/minigraph"
chmod go+x "$source_dir" "$source_dir/repo"
chmod -R go-rwx "$source_dir/repo/lessons"
if [ -d "$source_dir/private" ]; then chmod -R go-rwx "$source_dir/private"; fi
