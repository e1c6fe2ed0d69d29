/* main.c - what the generator writes into every clone: hand over to the runtime. */
#include "ditto_runtime.h"

int main(int argc, char **argv)
{
    return ditto_main(argc, argv, &ditto_clone_config);
}
