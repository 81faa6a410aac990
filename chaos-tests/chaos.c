/*
 * chaos.c: options, one seeded run from start to verdict, and the report.
 * See chaos.h and docs/chaos.md.
 */
#include "chaos.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"
#include "admin.h"
#include "check.h"
#include "report.h"
#include "faults.h"
#include "faults_move.h"
#include "plant.h"
#include "registers.h"
#include "run.h"
#include "workload.h"

/* ============================== options ============================== */

static void usage(FILE *f)
{
    fprintf(f, "usage: lapse-chaos [--seed S] [--duration SECONDS] [--items N] [--faults LIST]\n"
               "                   [--profile short|long] [--runs N] [--threads N]\n"
               "                   [--replication N] [--balance-primaries N]\n"
               "                   [--report FILE] [--bin-dir DIR] [--keep] [--quiet]\n"
               "  --faults LIST   comma-separated: node-kill, dest-kill, backfill-kill,\n"
               "                  coordinator-kill, stop-cont, partition,\n"
               "                  failover-twice, etcd-cut, dir-lost, oneway-cut (these\n"
               "                  four with --replication 2 or 3; oneway-cut as partition),\n"
               "                  move (four nodes, in namespaces too),\n"
               "                  coordinator-leader-kill, etcd-member-kill,\n"
               "                  coordinator-stop, all (default), none; partition needs root\n"
               "                  and runs the cluster in network namespaces; the last three\n"
               "                  run it on etcd with two coordinators (with partition: a\n"
               "                  member per node's namespace)\n"
               "  --profile       short (default: 20 s, 1200 items, each scenario in turn) or\n"
               "                  long (540 s, 4000 items, 3 seeds, faults mixed at random,\n"
               "                  3-8 quick kills or stops between them)\n"
               "  --runs N        N seeds: S, S+1, ... each on a fresh cluster\n"
               "  --replication N every table keeps N copies of each partition (1 to 3,\n"
               "                  default 1); above 1 the cluster runs on etcd\n"
               "  --balance-primaries N  the coordinators hand up to N primaryships over per\n"
               "                  pass to even out primaries (0 to 64, 0: off; default\n"
               "                  the coordinators' own, 4)\n"
               "  --keep          keep the run directory (daemon logs) even when a run passes\n"
               "The seed is printed first; --seed S replays the workload and fault schedule.\n"
               "Exit status: 0 every checked invariant held, 1 one broke, 2 bad usage.\n"
               "See docs/chaos.md.\n");
}

static int parse_faults(const char *s, unsigned *out)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", s);
    *out = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "node-kill") == 0) {
            *out |= CHAOS_FAULT_NODE_KILL;
        } else if (strcmp(tok, "backfill-kill") == 0) {
            *out |= CHAOS_FAULT_BACKFILL_KILL;
        } else if (strcmp(tok, "coordinator-kill") == 0) {
            *out |= CHAOS_FAULT_COORD_KILL;
        } else if (strcmp(tok, "stop-cont") == 0) {
            *out |= CHAOS_FAULT_STOP_CONT;
        } else if (strcmp(tok, "partition") == 0) {
            *out |= CHAOS_FAULT_PARTITION;
        } else if (strcmp(tok, "dest-kill") == 0) {
            *out |= CHAOS_FAULT_DEST_KILL;
        } else if (strcmp(tok, "coordinator-leader-kill") == 0) {
            *out |= CHAOS_FAULT_LEADER_KILL;
        } else if (strcmp(tok, "etcd-member-kill") == 0) {
            *out |= CHAOS_FAULT_ETCD_KILL;
        } else if (strcmp(tok, "coordinator-stop") == 0) {
            *out |= CHAOS_FAULT_COORD_STOP;
        } else if (strcmp(tok, "failover-twice") == 0) {
            *out |= CHAOS_FAULT_FAILOVER_TWICE;
        } else if (strcmp(tok, "etcd-cut") == 0) {
            *out |= CHAOS_FAULT_ETCD_CUT;
        } else if (strcmp(tok, "dir-lost") == 0) {
            *out |= CHAOS_FAULT_DIR_LOST;
        } else if (strcmp(tok, "oneway-cut") == 0) {
            *out |= CHAOS_FAULT_ONEWAY_CUT;
        } else if (strcmp(tok, "move") == 0) {
            *out |= CHAOS_FAULT_MOVE;
        } else if (strcmp(tok, "all") == 0) {
            *out |= CHAOS_FAULT_ALL;
        } else if (strcmp(tok, "none") != 0) {
            return -1;
        }
    }
    return 0;
}

int chaos_parse(chaos_opts *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"seed", required_argument, NULL, 's'},
        {"duration", required_argument, NULL, 'd'},
        {"items", required_argument, NULL, 'i'},
        {"faults", required_argument, NULL, 'f'},
        {"profile", required_argument, NULL, 'p'},
        {"report", required_argument, NULL, 'r'},
        {"runs", required_argument, NULL, 'n'},
        {"threads", required_argument, NULL, 't'},
        {"bin-dir", required_argument, NULL, 'b'},
        {"keep", no_argument, NULL, 'k'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"debug-plant-violation", optional_argument, NULL, 'P'},
        {"debug-idle", required_argument, NULL, 'I'},
        {"replication", required_argument, NULL, 'R'},
        {"balance-primaries", required_argument, NULL, 'B'},
        {NULL, 0, NULL, 0}};
    int seed_set = 0, dur = -1, items = -1, runs = -1, threads = -1;
    int64_t faults = -1;
    memset(o, 0, sizeof(*o));
    o->balance_primaries = -1;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            o->seed = strtoull(optarg, NULL, 10);
            seed_set = 1;
            break;
        case 'd':
            dur = atoi(optarg);
            break;
        case 'i':
            items = atoi(optarg);
            break;
        case 'f': {
            unsigned f;
            if (parse_faults(optarg, &f) != 0) {
                fprintf(stderr, "lapse-chaos: unknown fault in %s\n", optarg);
                usage(stderr);
                return 2;
            }
            faults = f;
            break;
        }
        case 'p':
            if (strcmp(optarg, "long") == 0) {
                o->profile_long = 1;
            } else if (strcmp(optarg, "short") != 0) {
                fprintf(stderr, "lapse-chaos: --profile is short or long\n");
                return 2;
            }
            break;
        case 'r':
            o->report_path = optarg;
            break;
        case 'n':
            runs = atoi(optarg);
            break;
        case 't':
            threads = atoi(optarg);
            break;
        case 'b':
            o->bin_dir = optarg;
            break;
        case 'k':
            o->keep = 1;
            break;
        case 'q':
            o->quiet = 1;
            break;
        case 'P':
            if (optarg == NULL || strcmp(optarg, "delete") == 0) {
                o->plant = PLANT_DELETE;
            } else if (strcmp(optarg, "expire") == 0) {
                o->plant = PLANT_EXPIRE;
            } else if (strcmp(optarg, "pause") == 0) {
                o->plant = PLANT_PAUSE;
            } else if (strcmp(optarg, "index") == 0) {
                o->plant = PLANT_INDEX;
            } else if (strcmp(optarg, "daemon") == 0) {
                o->plant = PLANT_DAEMON;
            } else if (strcmp(optarg, "copies") == 0) {
                o->plant = PLANT_COPIES;
            } else if (strcmp(optarg, "linear") == 0) {
                o->plant = PLANT_LINEAR;
            } else {
                fprintf(stderr, "lapse-chaos: --debug-plant-violation="
                                "delete|expire|pause|index|daemon|copies|linear\n");
                return 2;
            }
            break;
        case 'I':
            if (strcmp(optarg, "writes") == 0) {
                o->idle = CHAOS_IDLE_WRITES;
            } else if (strcmp(optarg, "faults") == 0) {
                o->idle = CHAOS_IDLE_FAULTS;
            } else {
                fprintf(stderr, "lapse-chaos: --debug-idle=writes|faults\n");
                return 2;
            }
            break;
        case 'B': {
            char *end = NULL;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end != '\0' || v < 0 || v > 64) {
                fprintf(stderr, "lapse-chaos: --balance-primaries wants 0 to 64\n");
                return 2;
            }
            o->balance_primaries = (int)v;
            break;
        }
        case 'R':
            if (strcmp(optarg, "1") != 0 && strcmp(optarg, "2") != 0 && strcmp(optarg, "3") != 0) {
                fprintf(stderr, "lapse-chaos: --replication wants 1, 2 or 3\n");
                return 2;
            }
            o->replication = (unsigned)(optarg[0] - '0');
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "lapse-chaos: unexpected argument %s\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    /* long: 540 s at ~0.8 faults/s, so the 3 runs of `make chaos` inject
     * over a thousand faults (docs/chaos.md). */
    o->duration_s = dur >= 0 ? dur : (o->profile_long ? 540 : 20);
    o->items = items > 0 ? items : (o->profile_long ? 4000 : 1200);
    o->runs = runs > 0 ? runs : (o->profile_long ? 3 : 1);
    o->threads = threads > 0 ? threads : (o->profile_long ? 4 : 3);
    o->faults = faults >= 0 ? (unsigned)faults : CHAOS_FAULT_ALL;
    if (o->threads > 16 || o->items < o->threads || o->duration_s > 86400) {
        fprintf(stderr, "lapse-chaos: need 1..16 threads, items >= threads, a sane duration\n");
        return 2;
    }
    if (o->plant == PLANT_COPIES && o->replication < 2) {
        fprintf(stderr, "lapse-chaos: --debug-plant-violation=copies needs --replication 2 or 3\n");
        return 2;
    }
    if (!seed_set) {
        FILE *f = fopen("/dev/urandom", "rb");
        if (f == NULL || fread(&o->seed, sizeof(o->seed), 1, f) != 1) {
            o->seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        }
        if (f != NULL) {
            fclose(f);
        }
        o->seed %= 1000000000ULL; /* short enough to type back */
    }
    return 0;
}

/* ============================== progress ============================== */

static void *progress_thread(void *p)
{
    run *r = p;
    for (;;) {
        for (int i = 0; i < 10 && !atomic_load(&r->progress_stop); i++) {
            clock_sleep_ms(100);
        }
        if (atomic_load(&r->progress_stop)) {
            return NULL;
        }
        long ops = 0;
        for (int k = 0; k < OP_KINDS; k++) {
            ops += atomic_load(&r->ops[k]);
        }
        char phase[96];
        pthread_mutex_lock(&r->phase_mu);
        snprintf(phase, sizeof(phase), "%s", r->phase);
        pthread_mutex_unlock(&r->phase_mu);
        fprintf(stderr,
                "chaos[seed %" PRIu64
                "] %5.1fs/%ds ops %ld errors %ld uncertain %ld faults %d | %s\n",
                r->seed, (double)(clock_mono_now().ms - r->start_mono_ms) / 1000.0,
                r->opt->duration_s, ops, atomic_load(&r->errors), atomic_load(&r->uncertain),
                atomic_load(&r->faults), phase);
    }
}

/* ============================== one run ============================== */

/* The nodes a run with these (effective) faults starts: a fourth for the
 * move fault, so a drained node leaves three for tables of three copies.
 * The namespace mode makes one node host each (netns_open). */
static int run_nodes(const chaos_opts *o)
{
    return (o->faults & CHAOS_FAULT_MOVE) ? FAULTS_MOVE_NODES : 3;
}

static int setup(run *r, char *err, size_t errlen)
{
    cluster_options co = {0};
    char node_args[700];
    snprintf(node_args, sizeof(node_args), "--ttl-backfill-rate %d", CHAOS_BACKFILL_RATE);
    if (r->opt->plant == PLANT_COPIES || (r->opt->faults & CHAOS_FAULT_ETCD_CUT)) {
        /* The switches: a node refusing its primaries' records (the copies
         * plant), a node cut off from etcd (the etcd-cut fault). */
        if (cluster_mkdtemp(r->fault_dir, sizeof(r->fault_dir), "chaos-faults", err, errlen) != 0) {
            r->fault_dir[0] = '\0';
            return LAPSE_EIO;
        }
        size_t used = strlen(node_args);
        snprintf(node_args + used, sizeof(node_args) - used, " --debug-fault-dir %s", r->fault_dir);
    }
    char coord_args[64] = "";
    if (r->opt->balance_primaries >= 0) {
        snprintf(coord_args, sizeof(coord_args), "--balance-primaries %d",
                 r->opt->balance_primaries);
        co.coordinator_args = coord_args;
    }
    co.nodes = run_nodes(r->opt);
    co.bin_dir = r->netns != NULL ? r->netns->bin_dir : r->opt->bin_dir;
    co.node_args = node_args;
    co.quiet = 1;
    if (r->opt->faults & CHAOS_FAULT_ON_ETCD) {
        co.etcd = 3; /* in namespace mode, on the first three node hosts (netns.h) */
        co.coordinators = 2;
    } else if (r->opt->replication > 1 || (r->opt->faults & CHAOS_FAULT_MOVE)) {
        /* leases fence the primaries (docs/replication.md); moves are the
         * etcd leader's */
        co.etcd = 1;
    }
    int rv = cluster_start(&r->cl, &co, err, errlen);
    if (rv != 0) {
        return rv;
    }
    lapse_error e;
    if ((rv = lapse_connect_timeout(&r->client, cluster_coordinator_url(r->cl), 1500, &e)) != 0 ||
        (rv = lapse_connect_timeout(&r->admin, cluster_coordinator_url(r->cl), 3000, &e)) != 0) {
        snprintf(err, errlen, "connect: %.400s", e.message);
        return rv;
    }
    int burst = faults_burst_keys(r->opt), spare = wl_spare_keys(r->opt);
    if (model_add_table(&r->m, "chaos_ttl", r->opt->items + CHAOS_BURST_SLOTS * burst + spare, 1) !=
            0 ||
        model_add_table(&r->m, "chaos_plain", r->opt->items + spare, 0) != 1) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    for (int ti = 0; ti < 2; ti++) {
        r->m.t[ti].spare_lo = r->m.t[ti].nkeys - spare;
    }
    r->m.t[0].indexed = 1; /* the LSI, the GSI and the stream (workload.h) */
    lapse_table_def def;
    wl_table_def(&r->m.t[0], &def);
    def.replication = r->opt->replication;
    if (((rv = admin_create_def(r, &def, NULL)) != 0 && rv != LAPSE_EEXISTS) ||
        ((rv = admin_create_table(r, "chaos_plain", NULL)) != 0 && rv != LAPSE_EEXISTS) ||
        (rv = admin_enable_ttl(r, "chaos_ttl", 20000)) != 0) {
        snprintf(err, errlen, "creating the tables: %s", lapse_strerror(rv));
        return rv;
    }
    r->m.t[0].ttl_resolved = 1;
    /* The copies asked for, or the run would prove nothing about them. */
    char *js = NULL, want[32];
    snprintf(want, sizeof(want), "\"Replication\":%u",
             r->opt->replication > 1 ? r->opt->replication : 1);
    if ((rv = lapse_describe_table(r->admin, "chaos_ttl", &js, &e)) != 0 ||
        strstr(js, want) == NULL) {
        snprintf(err, errlen, "chaos_ttl does not keep the copies asked for (%s): %.300s", want,
                 rv != 0 ? e.message : js);
        lapse_free(js);
        return rv != 0 ? rv : LAPSE_ESTATE;
    }
    lapse_free(js);
    return 0;
}

static int run_one(const chaos_opts *o, uint64_t seed, FILE *report, chaos_result *acc,
                   chaos_netns *ns)
{
    run *r = calloc(1, sizeof(*r));
    check_out *co = calloc(1, sizeof(*co));
    pthread_t workers[16], progress;
    int have_progress = 0, started = 0, failed = 0;
    char err[512] = "", run_dir[512] = "";
    if (r == NULL || co == NULL) {
        free(r);
        free(co);
        return 1;
    }
    r->opt = o;
    r->seed = seed;
    r->netns = ns;
    pthread_mutex_init(&r->flog.mu, NULL);
    pthread_mutex_init(&r->phase_mu, NULL);
    r->start_wall_ms = clock_wall_now().ms;
    r->start_mono_ms = clock_mono_now().ms;
    printf("lapse-chaos: seed %" PRIu64 "\n", seed);
    fflush(stdout);
    run_phase(r, "starting the cluster");
    if (!o->quiet && pthread_create(&progress, NULL, progress_thread, r) == 0) {
        have_progress = 1;
    }
    if (setup(r, err, sizeof(err)) != 0) {
        fprintf(stderr, "lapse-chaos: setup failed: %s\n", err);
        acc->setup_failed = 1;
        failed = 1;
        goto done;
    }
    snprintf(run_dir, sizeof(run_dir), "%s", cluster_run_dir(r->cl));
    r->start_mono_ms = clock_mono_now().ms;
    r->end_mono_ms = r->start_mono_ms + (int64_t)o->duration_s * 1000;
    r->end_wall_ms = clock_wall_now().ms + (int64_t)o->duration_s * 1000;
    r->start_wall_ms = clock_wall_now().ms;
    flog_add(r, "workload starts: %d threads, run dir %s", o->threads, run_dir);
    if (ns != NULL) {
        flog_add(r, "in network namespaces %s-{c,n1..n%d} on %s.0/24 (bridge in %s-br)%s",
                 ns->prefix, ns->nodes, ns->base, ns->prefix,
                 cluster_etcd(r->cl) != NULL ? ", etcd member i in n(i+1)" : "");
    }
    if (wl_start(r, workers, o->threads) != 0) {
        snprintf(err, sizeof(err), "cannot start the workload threads");
        acc->setup_failed = failed = 1;
        goto done;
    }
    started = 1;
    if (reg_start(r) != 0) {
        snprintf(err, sizeof(err), "cannot start the register threads");
        acc->setup_failed = failed = 1;
        goto done;
    }
    faults_run(r);
    if (o->plant == PLANT_PAUSE) {
        /* Pause deletion while the workload still writes due items. */
        plant_client(r, acc->planted_key, sizeof(acc->planted_key));
        clock_sleep_ms(3000);
    } else if (o->plant == PLANT_DAEMON) {
        /* A crash behind the harness's back while the workload runs. */
        plant_daemon_crash(r, acc->planted_key, sizeof(acc->planted_key));
        clock_sleep_ms(1000);
    }
    atomic_store(&r->stop, 1);
    run_phase(r, "joining the workload threads");
    wl_join(workers, o->threads);
    reg_join(r);
    started = 0;
    flog_add(r, "workload stopped");
    if (o->plant == PLANT_DELETE || o->plant == PLANT_EXPIRE) {
        plant_client(r, acc->planted_key, sizeof(acc->planted_key));
    } else if (o->plant == PLANT_COPIES) {
        plant_copies(r, acc->planted_key, sizeof(acc->planted_key));
    } else if (o->plant == PLANT_LINEAR) {
        plant_linear(r, acc->planted_key, sizeof(acc->planted_key));
    }
    /* The pause plant keeps due items for good: the settle deadline must
     * pass, so a short one will do. */
    check_settle(r, o->plant == PLANT_PAUSE ? 8000 : o->profile_long ? 90000 : 60000, co);
    check_items(r, co);
    run_phase(r, "reading the registers; checking their histories");
    reg_final_reads(r);
    check_linear(r, co);
    check_repl(r, co, o->profile_long ? 60000 : 30000);
    if (o->plant == PLANT_INDEX) {
        /* The stream and indexes matched the table: break them now, and
         * check again (the plants persist, so a short deadline will do). */
        plant_index(r, acc->planted_key, sizeof(acc->planted_key));
        check_repl(r, co, 8000);
    }
    /* The copies plant persists: a short deadline will do. The long
     * profile's last move scenario may end a drain that was not done: the
     * rebalancer then moves copies back for a minute or two (seed
     * 832704477: 90 s), each set one copy over its count meanwhile. */
    check_copies(r, co, o->plant == PLANT_COPIES ? 8000 : o->profile_long ? 180000 : 30000);
    check_daemons(r, co, o->plant == PLANT_DAEMON ? plant_daemon_exit : NULL);
    check_activity(r, co);
    co->planted_reported = r->nplants > 0;
    for (int i = 0; i < r->nplants; i++) {
        int named = 0;
        for (int k = 0; k < co->nv; k++) {
            named |= strcmp(co->v[k].where, r->plants[i]) == 0;
        }
        co->planted_reported &= named;
    }
    if (o->plant == PLANT_PAUSE) {
        /* Every item of the paused table that fell due is the plant's: one
         * named under invariant 2 will do. */
        size_t tl = strlen(r->m.t[0].name);
        for (int k = 0; k < co->nv; k++) {
            co->planted_reported |= co->v[k].inv == 2 &&
                                    strncmp(co->v[k].where, r->m.t[0].name, tl) == 0 &&
                                    co->v[k].where[tl] == '/';
        }
    }

    report_write(stdout, r, co, run_dir, 0);
    if (report != NULL) {
        report_write(report, r, co, run_dir, 1);
        fflush(report);
    }
    for (int i = 1; i <= CHAOS_INVARIANTS; i++) {
        acc->violations[i] += co->violations[i];
        acc->checked[i] |= co->checked[i];
        failed |= co->violations[i] > 0;
    }
    acc->items_checked += co->items;
    acc->unwritten += co->unwritten;
    if (co->idle > 0) {
        acc->idle_runs++;
        failed = 1;
    }
    acc->settle_ms = co->settle_ms;
    acc->planted_reported |= co->planted_reported;
done:
    if (started) {
        atomic_store(&r->stop, 1);
        wl_join(workers, o->threads);
    }
    atomic_store(&r->stop, 1);
    reg_join(r);
    atomic_store(&r->stop, 1);
    atomic_store(&r->progress_stop, 1);
    if (have_progress) {
        pthread_join(progress, NULL);
    }
    for (int k = 0; k < OP_KINDS; k++) {
        acc->ops += atomic_load(&r->ops[k]);
    }
    acc->faults += atomic_load(&r->faults);
    lapse_close(r->client);
    lapse_close(r->admin);
    if (r->cl != NULL) {
        /* A planted or idle run fails on purpose: nothing to look at. */
        int remove = (!failed || o->plant || o->idle) && !o->keep;
        if (!remove) {
            printf("lapse-chaos: daemon logs kept in %s\n", cluster_run_dir(r->cl));
        }
        cluster_free(r->cl, remove);
    }
    if (r->fault_dir[0] != '\0') {
        cluster_rm_rf(r->fault_dir);
    }
    model_fini(&r->m);
    reg_free(r);
    pthread_mutex_destroy(&r->flog.mu);
    pthread_mutex_destroy(&r->phase_mu);
    free(co);
    free(r);
    return failed;
}

int chaos_main(const chaos_opts *opts, chaos_result *res)
{
    chaos_result local;
    chaos_result *acc = res != NULL ? res : &local;
    memset(acc, 0, sizeof(*acc));
    chaos_opts eff = *opts; /* the faults that can run here */
    const chaos_opts *o = &eff;
    FILE *report = NULL;
    if (o->report_path != NULL && (report = fopen(o->report_path, "w")) == NULL) {
        fprintf(stderr, "lapse-chaos: cannot write %s: %s\n", o->report_path, strerror(errno));
        return 1;
    }
    /* Before any thread starts: the threads must be born in the namespace. */
    chaos_netns netns;
    int in_netns = 0;
    if (eff.faults & (CHAOS_FAULT_PARTITION | CHAOS_FAULT_ONEWAY_CUT)) {
        char why[512];
        if (netns_open(&netns, o->bin_dir, run_nodes(o), why, sizeof(why)) == 0) {
            in_netns = 1;
            printf("lapse-chaos: network-namespace mode: %s-{br,c,n1..n%d} on %s.0/24%s\n",
                   netns.prefix, netns.nodes, netns.base,
                   (eff.faults & CHAOS_FAULT_ON_ETCD)
                       ? ", an etcd member beside each of the first three nodes"
                       : "");
        } else {
            printf("lapse-chaos: partition and oneway-cut faults skipped: %s\n", why);
            eff.faults &= ~(unsigned)(CHAOS_FAULT_PARTITION | CHAOS_FAULT_ONEWAY_CUT);
            acc->partition_skipped = 1;
        }
        fflush(stdout);
    }
    if ((eff.faults & CHAOS_FAULT_ETCD_CUT) && o->replication < 2) {
        /* One copy: no primary to fence or fail over. */
        printf("lapse-chaos: etcd-cut fault skipped: it needs --replication 2 or 3\n");
        eff.faults &= ~(unsigned)CHAOS_FAULT_ETCD_CUT;
    }
    if ((eff.faults & CHAOS_FAULT_ONEWAY_CUT) && o->replication < 2) {
        /* One copy: no follower to cut a primary off from. */
        printf("lapse-chaos: oneway-cut fault skipped: it needs --replication 2 or 3\n");
        eff.faults &= ~(unsigned)CHAOS_FAULT_ONEWAY_CUT;
    }
    if ((eff.faults & CHAOS_FAULT_DIR_LOST) && o->replication < 2) {
        /* One copy: a lost data dir loses its items for good. */
        printf("lapse-chaos: dir-lost fault skipped: it needs --replication 2 or 3\n");
        eff.faults &= ~(unsigned)CHAOS_FAULT_DIR_LOST;
    }
    if (opts->faults != 0 && eff.faults == 0) {
        /* Every fault asked for was skipped: a faultless run tests nothing asked. */
        printf("lapse-chaos: no fault left to inject; nothing run\n");
        if (report != NULL) {
            fprintf(report, "== nothing run: partition fault skipped\n");
            fclose(report);
        }
        return 0;
    }
    int failed_runs = 0;
    for (int i = 0; i < o->runs; i++) {
        failed_runs +=
            run_one(o, o->seed + (uint64_t)i, report, acc, in_netns ? &netns : NULL) != 0;
    }
    if (in_netns) {
        netns_close(&netns);
    }
    printf("lapse-chaos: %d run(s), %d failed (%d of them for lack of activity: they proved "
           "nothing); %ld operations, %d faults, %ld written items checked (and %ld keys never "
           "written)\n",
           o->runs, failed_runs, acc->idle_runs, acc->ops, acc->faults, acc->items_checked,
           acc->unwritten);
    for (int i = 1; i <= CHAOS_INVARIANTS; i++) {
        printf("  invariant %d: %s\n", i,
               !acc->checked[i]          ? "not checked"
               : acc->violations[i] == 0 ? "PASS"
                                         : "FAIL");
    }
    if (report != NULL) {
        fprintf(report, "== summary: %d run(s), %d failed, seeds %" PRIu64 "..%" PRIu64 "\n",
                o->runs, failed_runs, o->seed, o->seed + (uint64_t)o->runs - 1);
        fclose(report);
        printf("lapse-chaos: report written to %s\n", o->report_path);
    }
    return failed_runs > 0 ? 1 : 0;
}
