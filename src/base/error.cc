#include "base/error.h"

namespace sluice {

std::string_view errc_name(errc e) {
  switch (e) {
    case errc::ok: return "ok";
    case errc::io_error: return "io_error";
    case errc::no_space: return "no_space";
    case errc::corrupt_data: return "corrupt_data";
    case errc::not_found: return "not_found";
    case errc::already_exists: return "already_exists";
    case errc::offset_out_of_range: return "offset_out_of_range";
    case errc::log_offline: return "log_offline";
    case errc::invalid_argument: return "invalid_argument";
    case errc::invalid_record: return "invalid_record";
    case errc::unsupported_format: return "unsupported_format";
    case errc::message_too_large: return "message_too_large";
    case errc::invalid_config: return "invalid_config";
    case errc::malformed: return "malformed";
    case errc::unsupported_version: return "unsupported_version";
    case errc::shutting_down: return "shutting_down";
    case errc::unsupported_compression: return "unsupported_compression";
  }
  return "unknown";
}

}  // namespace sluice
