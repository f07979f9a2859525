/*
 * The exit statuses of gradaudit, in one place (SPEC section 2, and the
 * EXIT STATUS section of gradaudit(1)).  Every command returns one of these.
 */
#ifndef GRADAUDIT_EXITCODE_H
#define GRADAUDIT_EXITCODE_H

enum exit_status {
	EXIT_OK = 0,		/* every audited configuration is consistent and correct */
	EXIT_WRONG = 1,		/* some gradient is inconsistent or differs from the reference */
	EXIT_USAGE = 2,		/* usage or configuration error: nothing was audited */
	EXIT_RUNTIME = 3,	/* MPI failure, dead rank, timeout or failed self-check */
	/*
	 * Plus N: signal N interrupted a numeric audit, whose job was ended;
	 * gradaudit then ends by signal N (launch_exit_interrupted).
	 */
	EXIT_INTERRUPTED = 128
};

#endif
