/*
 * Fixes that fix (issue 23): for each finding of a symbolic audit, the
 * --set KEY=VALUE options that make it disappear from this config, found
 * by auditing the config again with them, and the sentence that says
 * which setting to change and, under a framework profile, which flag of
 * the framework or which release changes it.
 *
 * The settings tried are those that bear on the finding: the one that
 * decided the step, loss factor or norm that went wrong (finding.cause),
 * then the others of its family (the loss's factors and the divisors, the
 * tp reductions, the tied embedding's order, the norm's settings), those
 * that differ from the reference first.  A fix is kept only when the
 * finding (its kind, on any of its parameters) is gone and no finding
 * the config did not have appears; it is then cut to the fewest settings
 * that still do that, so that it never names a key without effect on
 * this model.  When no such change exists the fix stays prose only.
 */
#ifndef GRADAUDIT_FIX_H
#define GRADAUDIT_FIX_H

struct audit;

/*
 * Fill fix_set, fix_alternative, cause and fix of every finding of a
 * symbolic audit of a->config (check, run, sweep and explain call it
 * before they report).  Findings measured from a trace (compare) are left
 * alone.  A large audit without numeric results is freed while the fixes
 * are audited and audited again after, so that only one audit is held at
 * a time: nothing may point into it across the call.
 */
void	 fix_derive(struct audit *);

#endif
