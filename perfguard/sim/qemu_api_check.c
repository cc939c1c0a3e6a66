/*
 * perfguard's QEMU plugin API check: a plugin that counts nothing, loaded before perfguard's
 * counting plugin (qemu_plugin.c), whose qemu_plugin_install refuses a QEMU whose plugin API the
 * counting plugin was not written for. QEMU then stops with this message instead of running a
 * plugin that could crash or count wrongly.
 *
 * Supported plugin API versions: 1 only (QEMU 4.2 to 8.2 offer it; validated with QEMU 7.2).
 * QEMU 9.0 raised its minimum to 2 and refuses a version-1 plugin by itself; a QEMU that still
 * accepts version 1 but whose current version is newer may have changed what the callbacks mean.
 *
 * A separate file so that the counting plugin's source, whose hash is part of every baseline's
 * toolchain, is not changed by the check. Build: cc -O2 -shared -fPIC.
 */
#include <stdint.h>
#include <stdio.h>

#define PG_EXPORT __attribute__((visibility("default")))
#define PG_API_MIN 1
#define PG_API_MAX 1

/* The head of QEMU's qemu_info_t (include/qemu/qemu-plugin.h; unchanged since API version 0): the
 * target name, then the API versions QEMU offers (its `version.min` and `version.cur`). */
typedef struct {
    const char *target_name;
    int api_min, api_cur;
} qemu_info_head_t;

PG_EXPORT int qemu_plugin_version = PG_API_MAX;

PG_EXPORT int qemu_plugin_install(uint64_t id, const qemu_info_head_t *info, int argc, char **argv)
{
    (void)id, (void)argc, (void)argv;
    if (!info)
        return 0;
    if (info->api_cur < PG_API_MIN || info->api_cur > PG_API_MAX || info->api_min > PG_API_MAX) {
        fprintf(stderr,
                "perfguard plugin: QEMU offers plugin API versions %d..%d, perfguard's plugin supports %d..%d "
                "(QEMU 7.2 to 8.2; validated with 7.2)\n",
                info->api_min, info->api_cur, PG_API_MIN, PG_API_MAX);
        return 1;
    }
    return 0;
}
