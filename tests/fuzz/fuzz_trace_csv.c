/* libFuzzer target for the openb CSV parsers (src/sim/trace_csv.c): the
 * first input line is tried as a pod header and as a node header, every
 * further line as a row of each. Parsers must return an error, never crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "trace_csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    gs_cluster nodes;
    gs_cluster_init(&nodes);
    gs_cluster_model(&nodes, "T4");
    gs_cluster_model(&nodes, "V100M16");
    trace_pod_cols pcols;
    trace_node_cols ncols;
    char err[256];
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    bool pod_ok = line && trace_pod_header(line, &pcols, err, sizeof(err)) == 0;
    bool node_ok = line && trace_node_header(line, &ncols, err, sizeof(err)) == 0;
    while (line && (line = strtok_r(NULL, "\n", &save)) != NULL) {
        gs_request r;
        if (pod_ok && trace_parse_pod_row(line, &pcols, &nodes, &r, err, sizeof(err)) == 0 && !gs_request_valid(&r))
            abort(); /* a parsed row must be a valid request */
        if (node_ok && nodes.num_nodes < 4096)
            trace_parse_node_row(line, &ncols, &nodes, err, sizeof(err));
    }
    gs_cluster_free(&nodes);
    free(text);
    return 0;
}
