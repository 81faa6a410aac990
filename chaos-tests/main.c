/*
 * main.c: `lapse-chaos`, the chaos harness of issue 5 (docs/chaos.md).
 */
#include "chaos.h"

int main(int argc, char **argv)
{
    chaos_opts o;
    int rv = chaos_parse(&o, argc, argv);
    if (rv != 0) {
        return rv == 1 ? 0 : 2;
    }
    return chaos_main(&o, NULL);
}
