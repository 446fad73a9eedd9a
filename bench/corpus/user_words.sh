#!/usr/bin/env bash
# Assemble the corpus of the "user's own words" question set (bench/data/user-words-answers.jsonl): nine documents
# Hearth was never tuned on, from Debian's packages, of four kinds:
#   PDF: R Data Import/Export and the R FAQ (r-doc-pdf), the GNU Libtasn1 manual (libtasn1-doc);
#   HTML: Python 3.11's csv and subprocess pages (python3.11-doc), git's stash and bisect pages (git-doc);
#   DOCX: Node.js's README (nodejs), turned into Word by pandoc;
#   CSV: tzdata's zone1970.tab (the time zones by country), its tab-separated rows written as CSV.
# Usage: bench/corpus/user_words.sh TARGET_DIR   (needs root or the packages already installed)
set -euo pipefail
target="${1:?usage: $0 TARGET_DIR}"
packages=(r-doc-pdf libtasn1-doc python3.11-doc git-doc nodejs tzdata pandoc)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "Installing ${missing[*]} from Debian" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
fi
mkdir -p "$target"
cp /usr/share/doc/r-doc-pdf/manual/R-data.pdf /usr/share/doc/r-doc-pdf/manual/R-FAQ.pdf "$target/"
cp /usr/share/doc/libtasn1-doc/libtasn1.pdf "$target/"
py=/usr/share/doc/python3.11-doc/html/library
cp "$py/csv.html" "$target/python-csv.html"
cp "$py/subprocess.html" "$target/python-subprocess.html"
cp /usr/share/doc/git-doc/git-stash.html /usr/share/doc/git-doc/git-bisect.html "$target/"
pandoc --quiet --from gfm --to docx /usr/share/doc/nodejs/README.md -o "$target/nodejs-readme.docx"
{
    echo "country codes,coordinates,time zone,comments"
    grep -v '^#' /usr/share/zoneinfo/zone1970.tab | awk -F'\t' '{
        for (i = 1; i <= 4; i++) { gsub(/"/, "\"\"", $i); printf "%s\"%s\"", (i > 1 ? "," : ""), $i } print "" }'
} >"$target/zone1970.csv"
while read -r name; do
    [ -f "$target/$name" ] || { echo "error: $name was not made; the question set needs it" >&2; exit 1; }
done < "$(dirname "${BASH_SOURCE[0]}")/user_words.files"
echo "$target: $(ls "$target" | wc -l) files" >&2
