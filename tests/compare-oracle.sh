# gradaudit compare held to the engines on one config, shared by the
# tests that do it on a stream of configs (compare-oracle.test on every
# testdata case, compare-oracle-random.test on the held-out random ones),
# so that what "compare agrees with the engines" means is written once.
# Sourced after tests/setup.sh:
#
#	oracle_require
#		skip the whole test without an MPI launcher or python3
#	oracle_init
#		zero the counts below
#	oracle_case DESC YAML
#		gradaudit run writes its own numeric step (float64) of YAML
#		as a trace (GRADAUDIT_TEST_TRACE_DIR,
#		src/numeric/tracewrite.c), compare audits it against its
#		reference, and tests/trace/oracle.py holds the two readings
#		against each other (its header says how); TAP results are
#		named DESC.  Adds one to oracle_traced when the step was
#		traced and compared, to oracle_several when it was left out
#		for several atoms a chunk.
#
# The trace's contribution of a micro-batch is the rank's atom of it, the
# gradient before the chunk's loss factor (as in a program that applies
# its factors after the backward), so that expressions compare atom for
# atom.  A config whose parameters take several atoms a chunk (of the
# multi-token or auxiliary losses, per source, or a MoE block boundary's
# two) has no trace of that kind: those are the only ones left out.

oracle_require()
{
	require_mpiexec
	oracle_python=${GRADAUDIT_TEST_PYTHON3:-python3}
	command -v "$oracle_python" >/dev/null 2>&1 || skip_all "no python3"
}

oracle_init()
{
	oracle_traced=0
	oracle_several=0
}

oracle_case()
{
	_oracle_name=$1
	_oracle_dir=$tmp/trace-$(basename "$2" .yaml)
	GRADAUDIT_TEST_TRACE_DIR=$_oracle_dir
	export GRADAUDIT_TEST_TRACE_DIR
	run "$GRADAUDIT" run --numerics float64 --format json --expand "$2"
	unset GRADAUDIT_TEST_TRACE_DIR
	ok '[ "$status" -le 1 ]' "$_oracle_name: run gives a verdict (exit $status)"
	printf '%s\n' "$stdout" >"$tmp/run.json"
	if [ ! -d "$_oracle_dir/parallel" ]; then
		case $stderr in
		*"trace not written: "*"has two atoms a chunk (a MoE block boundary's)"|\
		*"trace not written: "*"has several atoms a chunk (losses or sources)")
			oracle_several=$((oracle_several + 1))
			return ;;
		esac
		ok 1 "$_oracle_name: the step is written as a trace"
		diag "$stderr"
		return
	fi
	oracle_traced=$((oracle_traced + 1))
	run "$GRADAUDIT" compare --format json --expand "$_oracle_dir/parallel" \
	    --reference "$_oracle_dir/reference"
	ok '[ "$status" -le 1 ]' "$_oracle_name: compare reads the trace (exit $status)"
	[ "$status" -le 1 ] || { diag "$stderr"; return; }
	printf '%s\n' "$stdout" >"$tmp/compare.json"
	run "$oracle_python" "$srcdir/tests/trace/oracle.py" "$tmp/run.json" \
	    "$tmp/compare.json" "$_oracle_dir"
	check_eq "$status" 0 "$_oracle_name: compare's verdicts and expressions are the engines'"
	[ "$status" = 0 ] || diag "$stdout"
	rm -rf "$_oracle_dir"
}
