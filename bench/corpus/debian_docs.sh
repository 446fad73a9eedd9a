#!/usr/bin/env bash
# Assemble the evaluation corpus from third-party manuals that Debian ships, into one folder:
#   bash reference manual (PDF, 196 pages), shared-mime-info spec (PDF), Python 3.11 library and HOWTO pages
#   (HTML), Ubuntu and Debian release tables (CSV, distro-info-data), pip topics (Markdown), and two Python
#   HOWTOs converted to Word by pandoc (DOCX with real heading styles).
# Usage: bench/corpus/debian_docs.sh TARGET_DIR   (needs root or the packages already installed)
set -euo pipefail
target="${1:?usage: $0 TARGET_DIR}"
packages=(bash-doc python3.11-doc distro-info-data shared-mime-info python3-pip pandoc)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "Installing ${missing[*]} from Debian" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
fi
mkdir -p "$target"
py=/usr/share/doc/python3.11-doc/html
cp /usr/share/doc/bash-doc/bashref.pdf "$target/"
cp /usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf "$target/"
for page in library/json library/pathlib library/argparse library/datetime library/sqlite3 tutorial/controlflow; do
    cp "$py/$page.html" "$target/python-$(basename "$page").html"
done
cp /usr/share/distro-info/ubuntu.csv /usr/share/distro-info/debian.csv "$target/"
cp /usr/share/doc/python3-pip/html/topics/repeatable-installs.md "$target/pip-repeatable-installs.md"
cp /usr/share/doc/python3-pip/html/topics/authentication.md "$target/pip-authentication.md"
for howto in logging sorting; do
    pandoc --quiet --from html --to docx "$py/howto/$howto.html" -o "$target/python-howto-$howto.docx"
done
# The question sets name these files (tests/unit/test_bench_question_sets.py holds them to the list).
while read -r name; do
    [ -f "$target/$name" ] || { echo "error: $name was not made; the question sets need it" >&2; exit 1; }
done < "$(dirname "${BASH_SOURCE[0]}")/debian_docs.files"
echo "$target: $(ls "$target" | wc -l) files" >&2
