/*
 * put_get.c: the smallest liblapse program. Connects to the coordinator
 * ($LAPSE_COORDINATOR or tcp://127.0.0.1:7400), creates a table "Users" if
 * needed, writes one item and reads it back.
 *
 *   cc put_get.c $(pkg-config --cflags --libs lapse) -o put_get
 */
#include <stdio.h>

#include "lapse.h"

int main(void)
{
    lapse_client *c = NULL;
    lapse_item *user = NULL, *key = NULL, *found = NULL;
    lapse_error err;
    int rv;

    if ((rv = lapse_connect(&c, NULL, &err)) != 0) {
        goto fail;
    }

    lapse_table_def def = {.name = "Users", .partition_key = "UserName", .partition_key_type = 'S'};
    rv = lapse_create_table(c, &def, &err);
    if (rv != 0 && rv != LAPSE_EEXISTS) {
        goto fail;
    }

    /* Build an item attribute by attribute... */
    user = lapse_item_new();
    lapse_item_set_s(user, "UserName", "alice");
    lapse_item_set_n_i64(user, "Age", 31);
    if ((rv = lapse_put(c, "Users", user, NULL, &err)) != 0) {
        goto fail;
    }

    /* ...or parse DynamoDB JSON. */
    if ((rv = lapse_item_from_json(&key, "{\"UserName\":{\"S\":\"alice\"}}", &err)) != 0 ||
        (rv = lapse_get(c, "Users", key, &found, &err)) != 0) {
        goto fail;
    }
    char *json = found != NULL ? lapse_item_to_json(found) : NULL;
    printf("%s\n", json != NULL ? json : "{}");
    lapse_free(json);

fail:
    if (rv != 0) {
        fprintf(stderr, "put_get: %s\n", err.message);
    }
    lapse_item_free(user);
    lapse_item_free(key);
    lapse_item_free(found);
    lapse_close(c);
    return rv == 0 ? 0 : 1;
}
