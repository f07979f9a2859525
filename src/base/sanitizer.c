/*
 * Options for the sanitizers of an --enable-asan or --enable-ubsan build,
 * which their runtimes read before main (and the environment's ASAN_OPTIONS,
 * UBSAN_OPTIONS and LSAN_OPTIONS may still override).  A sanitizer that
 * finds an error exits 1 by default, and 1 is gradaudit's "some gradient is
 * wrong": a memory error, undefined behaviour or a leak would read as a
 * verdict on the user's config, and a CI gate would blame the config for a
 * broken gradaudit (issue 8: the clang UBSan build "found" every config
 * wrong).  Such a report is a runtime failure, exit 3, and the first one
 * ends the program.  Without sanitizers nothing calls these functions.
 */
#include "base/exitcode.h"

_Static_assert(EXIT_RUNTIME == 3, "the sanitizer options below say exitcode=3");

const char	*__asan_default_options(void);
const char	*__ubsan_default_options(void);
const char	*__lsan_default_options(void);

const char *
__asan_default_options(void)
{
	return "exitcode=3:halt_on_error=1:abort_on_error=0";
}

const char *
__ubsan_default_options(void)
{
	return "exitcode=3:halt_on_error=1:abort_on_error=0:print_stacktrace=1";
}

const char *
__lsan_default_options(void)
{
	return "exitcode=3";
}
