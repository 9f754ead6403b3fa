#include "cli/kafka_client.h"

#include "base/clock.h"

namespace sluice::cli {

result<conf_ptr> make_conf(const std::string& bootstrap,
                           const std::vector<std::pair<std::string, std::string>>& props) {
  conf_ptr conf(rd_kafka_conf_new());
  char errstr[512];
  auto set = [&](const std::string& k, const std::string& v) -> status {
    if (rd_kafka_conf_set(conf.get(), k.c_str(), v.c_str(), errstr, sizeof errstr) !=
        RD_KAFKA_CONF_OK) {
      return status(errc::invalid_config, k + ": " + errstr);
    }
    return {};
  };
  SLUICE_TRY(set("bootstrap.servers", bootstrap));
  for (const auto& [k, v] : props) SLUICE_TRY(set(k, v));
  return conf;
}

result<client_ptr> make_client(rd_kafka_type_t type, conf_ptr conf) {
  char errstr[512];
  rd_kafka_t* rk = rd_kafka_new(type, conf.get(), errstr, sizeof errstr);
  if (!rk) return error{errc::invalid_config, std::string("creating the client: ") + errstr};
  conf.release();  // owned by rk now
  return client_ptr(rk);
}

result<event_ptr> wait_admin_result(rd_kafka_queue_t* queue, rd_kafka_event_type_t type,
                                    std::chrono::milliseconds timeout) {
  const sluice::deadline until(timeout.count(), sluice::clock::system());
  while (!until.passed()) {
    event_ptr ev(rd_kafka_queue_poll(queue, 100));
    if (!ev) continue;
    if (rd_kafka_event_type(ev.get()) == type) {
      if (rd_kafka_event_error(ev.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return error{errc::io_error, rd_kafka_event_error_string(ev.get())};
      }
      return ev;
    }
    if (rd_kafka_event_type(ev.get()) == RD_KAFKA_EVENT_ERROR && rd_kafka_event_error_is_fatal(ev.get())) {
      return error{errc::io_error, rd_kafka_event_error_string(ev.get())};
    }
  }
  return error{errc::io_error, "timed out waiting for the broker's answer"};
}

admin_options_ptr admin_options(rd_kafka_t* rk, rd_kafka_admin_op_t op,
                                std::chrono::milliseconds timeout) {
  admin_options_ptr o(rd_kafka_AdminOptions_new(rk, op));
  char errstr[256];
  rd_kafka_AdminOptions_set_request_timeout(o.get(), static_cast<int>(timeout.count()), errstr,
                                            sizeof errstr);
  if (op == RD_KAFKA_ADMIN_OP_CREATETOPICS || op == RD_KAFKA_ADMIN_OP_DELETETOPICS ||
      op == RD_KAFKA_ADMIN_OP_CREATEPARTITIONS) {
    rd_kafka_AdminOptions_set_operation_timeout(o.get(), static_cast<int>(timeout.count()), errstr,
                                                sizeof errstr);
  }
  return o;
}

result<metadata_ptr> fetch_metadata(rd_kafka_t* rk, const std::string& topic,
                                    std::chrono::milliseconds timeout) {
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err;
  if (topic.empty()) {
    err = rd_kafka_metadata(rk, 1, nullptr, &md, static_cast<int>(timeout.count()));
  } else {
    rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
    err = rd_kafka_metadata(rk, 0, t, &md, static_cast<int>(timeout.count()));
    rd_kafka_topic_destroy(t);
  }
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return error{errc::io_error, std::string("metadata: ") + rd_kafka_err2str(err)};
  }
  return metadata_ptr(md);
}

result<std::pair<std::string, std::string>> split_key_value(const std::string& arg) {
  auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) {
    return error{errc::invalid_argument, "'" + arg + "' is not KEY=VALUE"};
  }
  return std::pair{arg.substr(0, eq), arg.substr(eq + 1)};
}

}  // namespace sluice::cli
