/*
 * What a caller gives an import of Megatron's arguments and what it gets
 * back (megatron.h), apart from the functions, so that the import's own
 * files read it without including the importer they are part of.
 */
#ifndef GRADAUDIT_MEGATRON_IMPORT_H
#define GRADAUDIT_MEGATRON_IMPORT_H

#include <stdbool.h>

#include "config/config.h"
#include "config/framework.h"

/*
 * The tokens of a document that --eod-mask-loss is taken to mask one of
 * (loss.valid_tokens "eod:N") when the user does not say.  Megatron's
 * GPTDataset packs documents of every length into its sequences, and
 * short web documents run to a few hundred tokens: a short length masks
 * more tokens, so the audit does not understate what the mask does.  It
 * is one more than a power of two so that chunks of the usual sizes
 * (micro_batch * seq / cp, a power of two or three times one) lose
 * different counts from one chunk to the next: with 511, chunks of 2048
 * slots all lost 4 up to the 128th, and a loss divided by the counts of
 * the wrong group passed unseen on GPT-3's 8 chunks.
 */
#define MEGATRON_EOD_DOCUMENT_TOKENS	513

struct megatron_import {
	/* Given by the caller. */
	bool			 have_version;	/* false: Megatron's main */
	struct fw_version	 version;	/* the release --framework names */
	int			 world;		/* --world, 0: not given */
	/* --eod-document-tokens, 0: MEGATRON_EOD_DOCUMENT_TOKENS. */
	long			 eod_document_tokens;

	/*
	 * The result: the keys set are the `given` bits of cfg, and for each
	 * of them why[k] says which arguments it came from, for a comment.
	 */
	struct config		 cfg;
	char			*why[KEY__COUNT];
	/*
	 * Every value was mapped, refused arguments aside: the caller can
	 * still ask the loader about the configuration, and report what it
	 * refuses in the same run (issue 28).
	 */
	bool			 mapped;
};

#endif
