/*
 * fault_switch.c: the test fault switches. See fault_switch.h.
 */
#include "fault_switch.h"

#include <stdio.h>
#include <unistd.h>

int fault_switch_on(const node_server *ns, const char *name)
{
    char path[sizeof(ns->debug_fault_dir) + 64];
    if (ns->debug_fault_dir[0] == '\0') {
        return 0;
    }
    snprintf(path, sizeof(path), "%s/node%u.%s", ns->debug_fault_dir, (unsigned)ns->id, name);
    return access(path, F_OK) == 0;
}
