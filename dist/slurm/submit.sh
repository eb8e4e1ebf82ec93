#!/bin/bash
# submit.sh - submit a borgcheck job array and the merge that depends on it, in one command.
#
#   submit.sh shards REPO N OUTDIR [SBATCH_OPTION...]   one repository as N shards
#   submit.sh fleet LISTFILE OUTDIR [SBATCH_OPTION...]  every repository of LISTFILE, one task each
#
# Prints the job ids, one a line: "shards ID" (or "fleet ID") then "merge ID"; the merge's exit
# code is the verdict (scontrol show job ID, or sacct where accounting runs) and its report is
# OUTDIR/report.txt. SBATCH_OPTION... go to both sbatch calls (e.g. --partition=backup
# --cpus-per-task=8 --time=08:00:00). OUTDIR must not hold the results of an earlier run: use one
# folder per run. Fleet: LISTFILE is copied to OUTDIR/repositories.list and the array runs over
# the copy. Relative paths are taken from the current folder, which the jobs run in too.
#
# Environment: the jobs get this shell's environment (sbatch's default), so set the passphrase
# source here, as for borgcheck: BORG_PASSCOMMAND, or BORGCHECK_PASSPHRASE_FILE (a file readable
# by the job's user), or BORG_PASSPHRASE (stored by slurmctld with the job: prefer the other two).
#   BORGCHECK                  the borgcheck binary on the nodes (default: borgcheck on PATH)
#   BORGCHECK_OPTIONS          more options for every borgcheck check (split on blanks)
#   BORGCHECK_MERGE_OPTIONS    options for borgcheck merge (split on blanks), e.g. "--json -v"
#   BORGCHECK_METRICS_FILE     shards: where the merge writes the metrics (default OUTDIR/borgcheck.prom)
#   BORGCHECK_METRICS_DIR      fleet: where each run writes its repo-I.prom (default OUTDIR)
#   BORGCHECK_SLURM_DIR        the folder of the .sbatch scripts (default: this script's folder)
# The job scripts and docs/distributed.md say the rest.
set -euo pipefail

me=${0##*/}
usage() {
  echo "usage: $me shards REPO N OUTDIR [SBATCH_OPTION...]" >&2
  echo "       $me fleet LISTFILE OUTDIR [SBATCH_OPTION...]" >&2
  exit 2
}
here=${BORGCHECK_SLURM_DIR:-$(dirname -- "$(readlink -f -- "$0")")}

(($# >= 1)) || usage
mode=$1
shift
case $mode in
  shards)
    (($# >= 3)) || usage
    repo=$1 n=$2 out=$3
    shift 3
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "$me: N must be a positive integer, not '$n'" >&2; exit 2; }
    script=$here/borgcheck-shards.sbatch
    ;;
  fleet)
    (($# >= 2)) || usage
    list=$1 out=$2
    shift 2
    [[ -f $list && -r $list ]] || { echo "$me: cannot read the list $list" >&2; exit 2; }
    n=$(awk '!/^[[:space:]]*(#|$)/ { n++ } END { print n + 0 }' "$list")
    ((n > 0)) || { echo "$me: $list names no repository" >&2; exit 2; }
    script=$here/borgcheck-fleet.sbatch
    ;;
  *) usage ;;
esac
[[ -r $script && -r $here/borgcheck-merge.sbatch ]] || { echo "$me: job scripts not found in $here" >&2; exit 2; }

mkdir -p -- "$out"
out=$(cd -- "$out" && pwd -P)
for f in "$out"/shard-*.jsonl* "$out"/repo-*.jsonl* "$out"/report.* "$out"/repositories.list "$out"/jobs; do
  if [[ -e $f ]]; then
    echo "$me: $out holds the results of an earlier run (${f##*/}): use a new folder" >&2
    exit 2
  fi
done

# `sbatch --parsable` prints "ID" or "ID;CLUSTER".
if [[ $mode == shards ]]; then
  array=$(sbatch --parsable --array="1-$n" --output="$out/slurm-%A_%a.out" "$@" "$script" "$repo" "$n" "$out")
else
  cp -- "$list" "$out/repositories.list"
  array=$(sbatch --parsable --array="1-$n" --output="$out/slurm-%A_%a.out" "$@" "$script" \
    "$out/repositories.list" "$out")
fi
array=${array%%;*}
read -r -a merge_options <<<"${BORGCHECK_MERGE_OPTIONS-}"
if ! merge=$(sbatch --parsable --dependency="afterany:$array" --output="$out/slurm-%j.out" "$@" \
  "$here/borgcheck-merge.sbatch" "$out" "${merge_options[@]}"); then
  echo "$me: the merge could not be submitted; cancelling the array $array" >&2
  scancel "$array" || true
  exit 1
fi
merge=${merge%%;*}
printf '%s %s\nmerge %s\n' "$mode" "$array" "$merge" | tee "$out/jobs"
