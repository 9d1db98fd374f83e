/*
 * harness.c times QuickJS-NG on the compute cases read from stdin (one per
 * line: a name, a tab, a script; lines starting with # are skipped). It
 * prints "tag name=ms ..." with the best of three evaluations of each case.
 * scripts/engine-flags.sh builds it natively and as WebAssembly at several
 * optimization levels, so the same cases measure what the engine's build
 * flags and the WebAssembly compiler cost.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quickjs.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static char *read_all(FILE *f) {
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    if (buf)
        buf[n] = 0;
    return buf;
}

int main(int argc, char **argv) {
    char *cases = read_all(stdin);
    if (!cases) {
        fprintf(stderr, "harness: out of memory\n");
        return 1;
    }
    JSRuntime *rt = JS_NewRuntime();
    JS_SetMaxStackSize(rt, 900 * 1024);
    JSContext *ctx = JS_NewContext(rt);
    printf("%s", argc > 1 ? argv[1] : "harness");
    for (char *line = strtok(cases, "\n"); line; line = strtok(NULL, "\n")) {
        char *tab = strchr(line, '\t');
        if (line[0] == '#' || !tab)
            continue;
        *tab = 0;
        const char *code = tab + 1;
        double best = -1;
        for (int r = 0; r < 3; r++) {
            double t0 = now_ms();
            JSValue v = JS_Eval(ctx, code, strlen(code), "<case>", JS_EVAL_TYPE_GLOBAL);
            double d = now_ms() - t0;
            if (JS_IsException(v)) {
                JSValue e = JS_GetException(ctx);
                const char *msg = JS_ToCString(ctx, e);
                fprintf(stderr, "\nharness: %s: %s\n", line, msg ? msg : "exception");
                return 1;
            }
            JS_FreeValue(ctx, v);
            if (best < 0 || d < best)
                best = d;
        }
        printf(" %s=%.1f", line, best);
        fflush(stdout);
    }
    printf("\n");
    JS_FreeContext(ctx);
    JS_FreeRuntime(rt);
    free(cases);
    return 0;
}
