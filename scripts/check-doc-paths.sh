#!/usr/bin/env bash
# check-doc-paths.sh — every repository path a document names must exist.
#
# Usage: scripts/check-doc-paths.sh [FILE.md ...]     (default: ARCHITECTURE.md)
#
# A path is a backticked token that contains a `/` or ends in .rs, .md, .toml, .sh, .c or .h.
# It is looked up among the repository's files (tracked, or untracked and not ignored):
#   - a token whose first component is a top-level entry of the repository
#     (`mpir-acquire/src/live/prove.rs`, `scripts/lib/`) must exist exactly there;
#   - any other token (`protocol.rs`, `native/mpich/walk.rs`, `live/tracer/`) is a path relative
#     to some crate or directory, as the documents write them: some file must end in `/TOKEN`
#     (a directory: some file must lie under a directory of that name).
# Skipped: absolute paths (`/proc/PID/maps` is the target's, not ours), tokens with spaces,
# globs or placeholders (`*`, `<`, `{`), and the names of files that belong to other projects
# (EXTERNAL below, each with its owner).
# Exits 1 listing every path that does not exist, as FILE:LINE: `TOKEN`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Files of other projects that the documents name (not in this repository).
EXTERNAL=(
    mpi_interface.h    # MQD's interface header (MPICH src/mpi/debugger/, Open MPI ompi/debuggers/)
    msgq_interface.h   # Open MPI's copy of it
    ompi_msgq_dll.c    # Open MPI's message-queue DLL
    ptype/o            # a gdb command, not a path
)

docs=("$@")
((${#docs[@]})) || docs=(ARCHITECTURE.md)

mapfile -t files < <(git ls-files --cached --others --exclude-standard | sort -u)
declare -A exact=() top=()
for f in "${files[@]}"; do
    exact[$f]=1
    top[${f%%/*}]=1
done

is_external() {
    local e
    for e in "${EXTERNAL[@]}"; do [[ $1 == "$e" ]] && return 0; done
    return 1
}

# Does some file end in /TOKEN (or, for a directory token, lie under a directory of that name)?
found_relative() {
    local tok=$1 f
    for f in "${files[@]}"; do
        if [[ $tok == */ ]]; then
            [[ /$f == */"$tok"* ]] && return 0
        else
            [[ /$f == */"$tok" ]] && return 0
        fi
    done
    return 1
}

exists() {
    local tok=$1 f
    if [[ -n ${top[${tok%%/*}]:-} && $tok == */* ]]; then
        [[ -n ${exact[${tok%/}]:-} ]] && return 0
        # A directory: some file lies under it.
        for f in "${files[@]}"; do [[ $f == "${tok%/}"/* ]] && return 0; done
        return 1
    fi
    found_relative "$tok"
}

missing=0
checked=0
for doc in "${docs[@]}"; do
    [[ -f $doc ]] || { echo "no such document: $doc" >&2; exit 2; }
    while IFS=: read -r line tok; do
        [[ $tok == */* || $tok =~ \.(rs|md|toml|sh|c|h)$ ]] || continue
        [[ $tok == /* || $tok =~ [[:space:]*\<\{] ]] && continue
        is_external "$tok" && continue
        checked=$((checked + 1))
        if ! exists "$tok"; then
            echo "$doc:$line: \`$tok\`"
            missing=$((missing + 1))
        fi
    done < <(grep -no '`[^`]*`' "$doc" | sed 's/`//g')
done

if ((missing)); then
    echo "check-doc-paths: $missing of $checked named paths do not exist (fix the document, or add a file of another project to EXTERNAL)" >&2
    exit 1
fi
echo "check-doc-paths: all $checked named paths exist in ${docs[*]}"
