# Common set-up for the script tests (tests/*.test), sourced first thing:
#
#	. "${srcdir:-.}/tests/setup.sh"
#
# It makes the shell strict (set -eu, LC_ALL=C), locates the program and the
# source tree, creates a private temporary directory that is removed on exit,
# and provides TAP helpers.  make check runs each test through automake's TAP
# driver, with the environment below set by AM_TESTS_ENVIRONMENT; a test can
# also be run by hand from the top of the build tree: sh tests/cli.test.
#
# Environment (defaults when the test is run by hand):
#	srcdir		top of the source tree			[.]
#	builddir	top of the build tree			[.]
#	GRADAUDIT	the program under test			[$builddir/src/gradaudit]
#	MPIEXEC		MPI launcher for the MPI tests; empty: they skip
#	MANDOC		mandoc, for the man page lint; empty: it skips [mandoc]
#	PACKAGE_VERSION	the version configure was given		[0.1.0]
#
# Variables a test may use:
#	tmp		the temporary directory (tests write only here: the
#			source tree is read-only under make distcheck)
#	status, stdout, stderr	set by run (below)
#	testdata	$srcdir/testdata
#
# TAP helpers (every result line is numbered automatically; a failed check
# is reported and counted, and the test goes on: the helpers return 0 so
# that set -e does not stop at the first failure):
#	plan N			announce N tests (or call done_testing at the end)
#	skip_all REASON		the whole test does not apply here: TAP skip, exit 0
#	ok COND DESC		pass when COND holds: COND is either a number, an
#				exit status (0 passes), or a shell command string
#				run with eval ('[ "$status" -eq 2 ]')
#	check_eq GOT WANT DESC	pass when the two strings are equal; shows both if not
#	check_match TEXT ERE DESC	pass when TEXT matches the extended regexp
#	check_file_empty FILE DESC	pass when FILE is empty; shows it if not
#	skip REASON [N]		record N (default 1) skipped tests
#	diag MSG...		a TAP comment (stdout, so it lands in the log)
#	bail_out MSG...		abort the whole test: TAP "Bail out!", exit 99
#	run CMD [ARG...]	run CMD with stdin from /dev/null, stdout and stderr
#				to $tmp/stdout and $tmp/stderr; sets status, stdout
#				and stderr (contents, trailing newlines dropped).
#				Never stops the test, whatever the status.
#	require_mpiexec		skip_all unless an MPI launcher is configured
#				(bail out instead where MPI tests are required,
#				see below), then mpi_leak_check.  Call it in
#				every test that starts MPI.
#	have_mpiexec		for a test of which only a part needs MPI: true
#				(after mpi_leak_check) when a launcher is
#				configured; false when not, which where MPI
#				tests are required also records a failed test
#	mpi_leak_check		set the LeakSanitizer options of the MPI tests
#				(see below)
#	done_testing		print the plan if none was given, check the count;
#				exit 1 if any test failed, else 0

set -eu
LC_ALL=C
export LC_ALL

: "${srcdir:=.}"
: "${builddir:=.}"
: "${GRADAUDIT:=$builddir/src/gradaudit}"
: "${MPIEXEC=}"
: "${MANDOC=mandoc}"
: "${PACKAGE_VERSION:=0.1.0}"
export srcdir builddir GRADAUDIT MPIEXEC MANDOC PACKAGE_VERSION
testdata=$srcdir/testdata

# gradaudit run starts its own MPI job with GRADAUDIT_MPIEXEC (or mpiexec);
# the tests use the launcher configure found unless the caller chose one.
if [ -n "$MPIEXEC" ] && [ -z "${GRADAUDIT_MPIEXEC:-}" ]; then
	GRADAUDIT_MPIEXEC=$MPIEXEC
	export GRADAUDIT_MPIEXEC
fi

# Reports must not depend on a terminal or on the user's colour settings.
unset NO_COLOR 2>/dev/null || :

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gradaudit-test.XXXXXX")
# A command that fails outside the helpers stops the test (set -e) with
# no TAP line, and the log said only "missing test plan" (trace-real.test,
# once in CI): say where it died.  A test may keep the shell's trace in
# $tmp/xtrace (set -x with stderr there, the commands' own stderr too):
# a test that fails or dies shows its end.
_tap_ended=
_died()
{
	_st=$1
	if [ "$_st" -ne 0 ] && [ -z "$_tap_ended" ]; then
		echo "# died with status $_st after test $_tap_count, before done_testing"
	fi
	if [ "$_st" -ne 0 ] && [ -s "$tmp/xtrace" ]; then
		echo "# the end of its trace and stderr:"
		# the trap's own first line last
		tail -n 41 "$tmp/xtrace" | sed '$d; s/^/#   /'
	fi
	rm -rf "$tmp"
}
trap '_st=$?; { set +x; } 2>/dev/null; _died "$_st"' 0
trap 'exit 129' 1
trap 'exit 130' 2
trap 'exit 143' 15

_tap_count=0
_tap_failed=0
_tap_planned=

plan()
{
	_tap_planned=$1
	echo "1..$1"
}

skip_all()
{
	echo "1..0 # SKIP $*"
	exit 0
}

# The quick tier (issue 27): make check runs the tests that take seconds;
# those make names in GRADAUDIT_SLOW_TESTS (every testdata case on MPI in
# three arithmetics, real torch steps, large meshes) run only with
# GRADAUDIT_TEST_FULL=1, which make check-full, scripts/test and CI set.
# Run by hand, a test always runs.
case " ${GRADAUDIT_SLOW_TESTS:-} " in
*" ${0##*/} "*)
	[ -n "${GRADAUDIT_TEST_FULL:-}" ] ||
	    skip_all "the full tier's: make check-full (or GRADAUDIT_TEST_FULL=1)"
	;;
esac

diag()
{
	printf '%s\n' "$*" | sed 's/^/# /'
}

bail_out()
{
	_tap_ended=1
	echo "Bail out! $*"
	exit 99
}

# _tap_result PASSED DESC: print one numbered result line.
_tap_result()
{
	_tap_count=$((_tap_count + 1))
	if [ "$1" -eq 1 ]; then
		echo "ok $_tap_count - $2"
	else
		_tap_failed=$((_tap_failed + 1))
		echo "not ok $_tap_count - $2"
	fi
}

ok()
{
	_ok_cond=$1
	_ok_desc=$2
	case $_ok_cond in
	''|*[!0-9]*)
		if eval "$_ok_cond"; then _ok_pass=1; else _ok_pass=0; fi
		;;
	*)
		if [ "$_ok_cond" -eq 0 ]; then _ok_pass=1; else _ok_pass=0; fi
		;;
	esac
	_tap_result "$_ok_pass" "$_ok_desc"
	if [ "$_ok_pass" -eq 0 ]; then
		diag "failed: $_ok_cond"
	fi
}

check_eq()
{
	if [ "$1" = "$2" ]; then
		_tap_result 1 "$3"
		return
	fi
	_tap_result 0 "$3"
	diag "got:"
	diag "$1"
	diag "expected:"
	diag "$2"
}

check_match()
{
	# grep reads a pattern of several lines as one pattern per line and
	# matches when any of them does: a two-line expectation would pass on
	# either line alone.  Such a check must be two checks.
	case $2 in
	*'
'*)
		_tap_result 0 "$3"
		diag "check_match: the pattern spans lines; match each line apart:"
		diag "$2"
		return
		;;
	esac
	if printf '%s\n' "$1" | grep -Eq -- "$2"; then
		_tap_result 1 "$3"
		return
	fi
	_tap_result 0 "$3"
	diag "no match for /$2/ in:"
	diag "$1"
}

check_file_empty()
{
	if [ ! -s "$1" ]; then
		_tap_result 1 "$2"
		return
	fi
	_tap_result 0 "$2"
	diag "$1 is not empty:"
	diag "$(head -n 20 "$1")"
}

skip()
{
	_skip_n=${2:-1}
	while [ "$_skip_n" -gt 0 ]; do
		_tap_count=$((_tap_count + 1))
		echo "ok $_tap_count # SKIP $1"
		_skip_n=$((_skip_n - 1))
	done
}

run()
{
	if "$@" </dev/null >"$tmp/stdout" 2>"$tmp/stderr"; then
		status=0
	else
		status=$?
	fi
	stdout=$(cat "$tmp/stdout")
	stderr=$(cat "$tmp/stderr")
}

# The MPI tests are leak-checked like the others: the numeric engine runs
# in the MPI processes.  LeakSanitizer suppresses only what MPICH allocates
# for itself in MPI_Init and MPI_Finalize (tests/lsan-mpi.supp), such as
# the blocks of a plug-in that MPI_Init loads and unloads, whose own frames
# have no name by the time of the report; never a block of gradaudit's.
# Full allocation stacks (fast_unwind_on_malloc=0) are what let the
# suppressions see those two frames: MPICH is built without frame pointers,
# so the fast unwinder stops inside it.  This doubles the CPU time of the
# MPI tests in an --enable-asan build; without ASan the options do nothing.
mpi_leak_check()
{
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
	LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(cd "$srcdir" && pwd)/tests/lsan-mpi.supp"
	export ASAN_OPTIONS LSAN_OPTIONS
}

# Without a launcher the MPI tests skip, as a user without MPI expects of
# make check; but a CI run that skipped them would pass without auditing
# anything numerically.  CI=true (set by most CI services) or
# GRADAUDIT_TEST_REQUIRE_MPI=1 (set by .ci/run) makes a missing launcher a
# failure.
mpi_required()
{
	[ "${CI:-}" = true ] || [ "${GRADAUDIT_TEST_REQUIRE_MPI:-}" = 1 ]
}

_mpi_required_why="no MPI launcher, and the MPI tests are required here (CI=true or GRADAUDIT_TEST_REQUIRE_MPI=1): install mpich or set MPIEXEC"

require_mpiexec()
{
	if [ -z "$MPIEXEC" ]; then
		if mpi_required; then
			bail_out "$_mpi_required_why"
		fi
		skip_all "no MPI launcher (configure found no mpiexec; set MPIEXEC)"
	fi
	mpi_leak_check
}

have_mpiexec()
{
	if [ -n "$MPIEXEC" ]; then
		mpi_leak_check
		return 0
	fi
	if mpi_required; then
		_tap_result 0 "an MPI launcher is configured"
		diag "$_mpi_required_why"
	fi
	return 1
}

done_testing()
{
	_tap_ended=1
	if [ -z "$_tap_planned" ]; then
		echo "1..$_tap_count"
	elif [ "$_tap_planned" -ne "$_tap_count" ]; then
		diag "planned $_tap_planned tests but ran $_tap_count"
		exit 1
	fi
	if [ "$_tap_failed" -ne 0 ]; then
		diag "$_tap_failed of $_tap_count tests failed"
		exit 1
	fi
	exit 0
}

# same_cells NAME ARGS...: check --format json ARGS, grouped and expanded
# (CMD, default check, is the command): the grouped report, read back by
# tests/cells-canon.awk as the man page says, must say what --expand says
# cell for cell (json-shape.test, self-terms.test).
same_cells()
{
	name=$1
	shift
	run "$GRADAUDIT" ${CMD:-check} --format json "$@"
	printf '%s\n' "$stdout" >"$tmp/stdout.grouped"
	printf '%s\n' "$stdout" | awk -f "$srcdir/tests/cells-canon.awk" |
	    sort >"$tmp/grouped"
	run "$GRADAUDIT" ${CMD:-check} --format json --expand "$@"
	printf '%s\n' "$stdout" | awk -f "$srcdir/tests/cells-canon.awk" |
	    sort >"$tmp/expanded"
	ok "[ -s '$tmp/expanded' ] && cmp -s '$tmp/grouped' '$tmp/expanded'" \
	    "$name: grouped cells read as the expanded ones"
	ok "! grep -q BAD-N '$tmp/grouped'" "$name: every term counts its atoms"
	ok "! grep -q '^          \"rank\": ' '$tmp/stdout.grouped'" \
	    "$name: grouped by default"
}

# engines_agree CELLS: "agree" when, in a numeric report read by
# tests/cells.awk, the numeric engine's verdicts are the symbolic ones:
# numerics.correct against correct (the parameters' values), and
# grad_norm.numeric_correct against grad_norm.correct; else the
# pairs, "params SYMBOLIC/NUMERIC norm SYMBOLIC/NUMERIC".
engines_agree()
{
	awk '
	/^symbolic correct=/	{ ps = substr($2, 9) }
	/^numeric correct=/	{ pn = substr($2, 9) }
	/^grad_norm correct=/	{ gs = substr($2, 9) }
	/^grad_norm numeric correct=/	{ gn = substr($3, 9) }
	END {
		if (ps != "" && ps == pn && gs == gn)
			print "agree"
		else
			printf "params %s/%s norm %s/%s\n", ps, pn, gs, gn
	}' "$1"
}

# agree_on_mpi DESC WANT FILE: run FILE on MPI (two processes) and hold
# it to check's exit status WANT: run's self-check passes and run exits
# WANT; the numeric verdicts are the symbolic ones (engines_agree); and
# the hashes of the used cells match the reference exactly when the
# symbolic engine calls every used value right.  Rows never updated
# (stale-rows, pytorch #176076) fail a step whose values are all right,
# which no hash shows.  The held-out streams share it (agree-*.test).
agree_on_mpi()
{
	run "$GRADAUDIT" run --format json --expand --procs 2 "$3"
	check_eq "$status" "$2" \
	    "$1: run's self-check passes, it exits with check's verdict (stderr: $stderr)"
	printf '%s\n' "$stdout" | awk -f "$srcdir/tests/cells.awk" >"$tmp/cells"
	_agree_numeric=$(engines_agree "$tmp/cells")
	_agree_hashes=true
	grep -q 'used=true .* hash_matches=false$' "$tmp/cells" &&
	    _agree_hashes=false
	_agree_symbolic=false
	[ "$2" = 0 ] && _agree_symbolic=true
	if [ "$2" = 1 ] && grep -q '^stale ' "$tmp/cells" &&
	    ! grep -q 'used=true ok=false' "$tmp/cells"; then
		_agree_symbolic=true
	fi
	check_eq "$_agree_numeric $_agree_hashes" "agree $_agree_symbolic" \
	    "$1: numeric verdict and hash verdict are the symbolic one ($_agree_symbolic)"
}

# GRADAUDIT may also name an installed program found in PATH.
case $GRADAUDIT in
*/*)	;;
*)	GRADAUDIT=$(command -v "$GRADAUDIT" || echo "$GRADAUDIT") ;;
esac
if [ ! -x "$GRADAUDIT" ]; then
	bail_out "$GRADAUDIT is not an executable: build it first (make)"
fi
