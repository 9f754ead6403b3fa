// `sluice`: the one binary. `sluice serve` runs a broker; the other
// subcommands are Kafka clients built on librdkafka.

#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"
#include "cli/serve.h"

int main(int argc, char** argv) {
  // `serve` takes every setting as --KEY VALUE, so the configuration schema
  // (not CLI11) parses its arguments.
  if (argc >= 2 && std::strcmp(argv[1], "serve") == 0) {
    return sluice::cli::serve_main(argc - 2, argv + 2);
  }
  CLI::App app{"Sluice: a message log that speaks the Kafka protocol"};
  app.require_subcommand(1);
  app.add_subcommand("serve", "Run a broker (see `sluice serve --help` for every setting)");
  int exit_code = 0;
  sluice::cli::add_topic_command(app, &exit_code);
  sluice::cli::add_produce_command(app, &exit_code);
  sluice::cli::add_consume_command(app, &exit_code);
  sluice::cli::add_group_command(app, &exit_code);
  sluice::cli::add_config_command(app, &exit_code);
  sluice::cli::add_cluster_command(app, &exit_code);
  sluice::cli::add_txn_command(app, &exit_code);
  sluice::cli::add_dlq_command(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return exit_code;
}
