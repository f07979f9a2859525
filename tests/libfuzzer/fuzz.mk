# The libFuzzer harnesses, built by scripts/fuzz (which documents the
# variables) into $(B), outside the autotools build: every object of the
# library is compiled again with clang's coverage instrumentation and
# sanitizers, which the configured build cannot share.
#
#	make -f tests/libfuzzer/fuzz.mk B=build-fuzz [HARNESSES=...]

B ?= build-fuzz
# MPICH's mpicc wraps the compiler -cc names (cmd-run.c, launch.c and
# transport.c include mpi.h), as .ci/run's clang pass does.
FUZZ_CC ?= mpicc -cc=clang
SANITIZE = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS ?= -g -O1 -fno-omit-frame-pointer
LIBS = -lyaml -lxxhash -ljansson -lm
HARNESSES ?= config profile import trace baseline toml

S = src
T = tests/libfuzzer
CPPFLAGS = -I$(S) -I$(T) -Itests -DFUZZ_FRAMEWORKS='"$(CURDIR)/frameworks"'
CFLAGS = -std=gnu11 -Wall -Wextra $(FUZZ_CFLAGS) $(SANITIZE) -MMD -MP

# The library: every source of src/'s layers (src/README) but the
# program's own sanitizer options; main() is src/gradaudit.c, outside them.
LIB_SRCS = $(filter-out $(S)/base/sanitizer.c,$(wildcard $(S)/*/*.c))
LIB_OBJS = $(patsubst $(S)/%.c,$(B)/lib/%.o,$(LIB_SRCS))
# What the harnesses share; trace's reports go through tests/fuzz-render.c,
# apart from jansson's names, and toml's contract is tests/toml-check.c.
COMMON_OBJS = $(B)/harness.o $(B)/fuzz-render.o $(B)/toml-check.o

all: $(patsubst %,$(B)/fuzz-%,$(HARNESSES))

$(B)/lib/%.o: $(S)/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) $(CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(B)/harness.o: $(T)/harness.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(B)/fuzz-render.o: tests/fuzz-render.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) $(CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

# The TOML reader's contract, which tests/fuzz-toml.c checks too.
$(B)/toml-check.o: tests/toml-check.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) $(CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(B)/%.o: $(T)/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) $(CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(B)/libfuzz.a: $(LIB_OBJS)
	rm -f $@
	ar cr $@ $(LIB_OBJS)

$(B)/fuzz-%: $(B)/%.o $(COMMON_OBJS) $(B)/libfuzz.a
	$(FUZZ_CC) $(CFLAGS) -fsanitize=fuzzer $^ $(LIBS) -o $@

.PHONY: all
.SECONDARY:

-include $(wildcard $(B)/*.d $(B)/lib/*/*.d)
