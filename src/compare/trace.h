/*
 * A trace of one real training step, as the hook python/gradaudit_trace.py
 * writes it (gradaudit-trace(5)): a directory with manifest.json and one
 * safetensors file per rank, holding each rank's per-micro-batch gradient
 * contributions, the gradient it held when the optimizer stepped, and its
 * weights.  trace_open reads and checks all of it before anything is
 * compared, so that a bad trace is exit 2 with the file and tensor named
 * and never a wrong verdict; the tensors stay in the mapped files.
 */
#ifndef GRADAUDIT_TRACE_H
#define GRADAUDIT_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"

/* The bounds a trace must fit (gradaudit-trace(5), LIMITS). */
#define TRACE_MAX_DIMS		8
#define TRACE_MAX_WORLD		4096
#define TRACE_MAX_MICRO_BATCHES	1024
#define TRACE_MAX_HEADER	(100u << 20)	/* safetensors' own limit */
#define TRACE_ERROR_SIZE	1024

enum trace_dtype {
	TRACE_F32,
	TRACE_F64,
	TRACE_BF16,
	TRACE_F16
};

enum trace_kind {
	TRACE_CONTRIB,		/* "contrib/M/NAME": micro-batch M, before sync */
	TRACE_FINAL,		/* "final/NAME": what the optimizer used */
	TRACE_WEIGHT		/* "weight/NAME": the parameter's value */
};

/* The mesh dimensions a trace may name, in this order. */
enum trace_dim {
	TRACE_DIM_DP,
	TRACE_DIM_PP,
	TRACE_DIM_TP,
	TRACE_DIM_CP,
	TRACE_DIM_EP,
	TRACE_DIM_ETP,
	TRACE_DIM__COUNT
};

struct trace_param {
	const char	*name;
	int		 ndim;
	int64_t		 shape[TRACE_MAX_DIMS];
	int64_t		 elems;
	int		 rank;		/* the first rank file that gives it */
};

/*
 * One stored tensor: elements [lo, hi) of the box offset + [0, box) of a
 * logical parameter, flattened row-major (lo 0 and hi the box's element
 * count when the whole box is stored).
 */
struct trace_tensor {
	const char	*key;
	int		 rank;
	int		 param;		/* index in trace.params */
	enum trace_kind	 kind;
	int		 mb;		/* TRACE_CONTRIB only */
	int64_t		 offset[TRACE_MAX_DIMS], box[TRACE_MAX_DIMS];
	int64_t		 lo, hi;
	enum trace_dtype dtype;
	const unsigned char *data;	/* hi - lo elements, little-endian */
};

struct trace_rank {
	const char	*file;		/* path, for messages */
	void		*map;
	size_t		 maplen;
	bool		 has_coord[TRACE_DIM__COUNT];
	int		 coord[TRACE_DIM__COUNT];
	int64_t		*tokens;	/* micro_batches entries, or NULL */
	bool		 has_norm, has_clip;
	double		 grad_norm, clip_coef;
};

struct trace {
	const char	*dir;
	bool		 reference;	/* mode "reference" */
	const char	*step;
	const char	*reference_of;	/* reference: the step it replays */
	int		 world;
	int		 micro_batches;
	bool		 has_mesh;
	int		 mesh[TRACE_DIM__COUNT];	/* sizes, 1 if unnamed */
	struct trace_param *params;	/* in order of first appearance */
	size_t		 nparams;
	/* Sorted by param, then kind, rank, micro-batch and box. */
	struct trace_tensor *tensors;
	size_t		 ntensors;
	struct trace_rank *ranks;	/* world entries */
	struct arena	 arena;		/* owns every string and array */
};

/*
 * Read and check the trace in dir.  0, or -1 with a message in err
 * ("DIR/rank-1.safetensors: tensor final/x: ...") and nothing to free.
 */
int		 trace_open(struct trace *, const char *dir, char *err,
		    size_t errlen);
void		 trace_close(struct trace *);

const char	*trace_dim_name(enum trace_dim);	/* "dp" */
const char	*trace_dtype_name(enum trace_dtype);	/* "float32" */
size_t		 trace_dtype_size(enum trace_dtype);
/* Element i (0 <= i < hi - lo) of a tensor, as a double. */
double		 trace_value(const struct trace_tensor *, int64_t i);
/*
 * Let the kernel drop a tensor's pages (they are read again from the
 * file when needed): memory then grows with the largest parameter, not
 * with the trace.
 */
void		 trace_release(const struct trace_tensor *);
/* A list of sizes as a trace writes it, "[4, 16]", into buf; buf. */
const char	*trace_format_dims(char *buf, size_t len, const int64_t *,
		    int n);
/* The index in trace.params of name, or -1. */
int		 trace_param_index(const struct trace *, const char *name);
/*
 * The tensors of param p of one kind: *first is the index of the first in
 * trace.tensors, the count is returned (they are consecutive).
 */
size_t		 trace_tensors_of(const struct trace *, int param,
		    enum trace_kind, size_t *first);

#endif
