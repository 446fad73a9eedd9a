#!/usr/bin/env bash
# Assemble the second evaluation corpus: four PDF manuals Hearth was never tuned on, from Debian's documentation
# packages: An Introduction to R and the R Language Definition (r-doc-pdf), the GLPK reference manual and the
# GNU MathProg language manual (glpk-doc). The question set bench/data/debian-manuals-retrieval.jsonl is about them.
# Usage: bench/corpus/debian_manuals.sh TARGET_DIR   (needs root or the packages already installed)
set -euo pipefail
target="${1:?usage: $0 TARGET_DIR}"
packages=(r-doc-pdf glpk-doc)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "Installing ${missing[*]} from Debian" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
fi
mkdir -p "$target"
cp /usr/share/doc/r-doc-pdf/manual/R-intro.pdf /usr/share/doc/r-doc-pdf/manual/R-lang.pdf "$target/"
cp /usr/share/doc/glpk-doc/glpk.pdf /usr/share/doc/glpk-doc/gmpl.pdf "$target/"
while read -r name; do
    [ -f "$target/$name" ] || { echo "error: $name was not made; the question set needs it" >&2; exit 1; }
done < "$(dirname "${BASH_SOURCE[0]}")/debian_manuals.files"
echo "$target: $(ls "$target" | wc -l) files" >&2
