/*
 * Measuring how much each finding of an audit matters (issue 23), once per
 * audit after its findings; the value it sets is struct effect (effect.h).
 */
#ifndef GRADAUDIT_MEASURE_H
#define GRADAUDIT_MEASURE_H

struct audit;

/* Measure the effect of every finding of the audit (after its findings). */
void	 measure_effects(struct audit *);
/*
 * After a float numeric audit of the same audit: measure from its numbers
 * the findings the coefficients could not (EFFECT_UNMEASURED).
 */
void	 measure_effects_numeric(struct audit *);

#endif
