# Shared by the client scripts. The sourcing script sets $client (the
# tool's name) and $work (its scratch directory) and defines
#   list             list the objects under the test prefix,
#   put FILE NAME    upload FILE as NAME under the prefix,
#   get NAME FILE    download NAME from under the prefix into FILE.

step() { echo "$client: $1"; }
fail() { echo "$client: $1" >&2; exit 1; }

# Lists the prefix, uploads a small object and downloads it unchanged.
small_round_trip() {
  step list
  list

  step upload
  echo "written by $client" > "$work/small.txt"
  put "$work/small.txt" small.txt

  step download
  get small.txt "$work/small.back"
  cmp -s "$work/small.txt" "$work/small.back" || fail "downloaded bytes differ from the upload"
}
