/* A plugin library that registers no plugin: loaded (dlopen), it appends its name to $NEREID_PLUGIN_ORDER, so a
 * check can see that Nereid loads `--backend-config=tensorrt,plugins="a.so;b.so"` in the order given, before any
 * engine. Built by scripts/gpu/pack-tensorrt.sh with -DWHICH='"a"' or '"b"'. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor)) static void nereid_order_loaded(void) {
  const char *path = getenv("NEREID_PLUGIN_ORDER");
  if (path == NULL) return;
  FILE *f = fopen(path, "a");
  if (f == NULL) return;
  fprintf(f, "%s\n", WHICH);
  fclose(f);
}
