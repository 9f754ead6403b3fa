#pragma once

namespace sluice::cli {

// Runs `sluice serve` with the arguments after "serve". Returns the process
// exit status: 0 after a clean shutdown, 2 for a refused configuration.
int serve_main(int argc, char** argv);

}  // namespace sluice::cli
