#pragma once

// Errors as values. `status` is success or an `error`; `result<T>` is a T or
// an `error`. Both are [[nodiscard]]: an ignored failure is a compile error
// (warnings are errors). Modelled on std::expected (C++23), kept small.

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "base/assert.h"
#include "base/error.h"

namespace sluice {

struct error {
  errc code = errc::ok;
  std::string message;  // for logs and for the client where Kafka carries a message
};

inline error make_error(errc code, std::string message) { return error{code, std::move(message)}; }

class [[nodiscard]] status {
 public:
  status() = default;
  status(error e) : error_(std::move(e)) { SLUICE_ASSERT(error_->code != errc::ok, "error with ok code"); }
  status(errc code, std::string message) : status(error{code, std::move(message)}) {}

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const error& err() const {
    SLUICE_ASSERT(error_.has_value(), "err() on ok status");
    return *error_;
  }
  errc code() const { return error_ ? error_->code : errc::ok; }
  // Marks a status as deliberately ignored (for example a best-effort cleanup).
  void ignore() const {}

 private:
  std::optional<error> error_;
};

template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  result(error e) : v_(std::in_place_index<1>, std::move(e)) {
    SLUICE_ASSERT(std::get<1>(v_).code != errc::ok, "error with ok code");
  }
  result(errc code, std::string message) : result(error{code, std::move(message)}) {}
  // A failed status converts to a failed result of any type.
  result(const status& s) : result(s.err()) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    SLUICE_ASSERT(ok(), "value() on failed result");
    return std::get<0>(v_);
  }
  const T& value() const& {
    SLUICE_ASSERT(ok(), "value() on failed result");
    return std::get<0>(v_);
  }
  T&& value() && {
    SLUICE_ASSERT(ok(), "value() on failed result");
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const error& err() const {
    SLUICE_ASSERT(!ok(), "err() on ok result");
    return std::get<1>(v_);
  }
  errc code() const { return ok() ? errc::ok : err().code; }
  status to_status() const { return ok() ? status() : status(err()); }

 private:
  std::variant<T, error> v_;
};

}  // namespace sluice

// Propagates a failed status or result out of the calling function.
#define SLUICE_TRY(expr)                   \
  do {                                     \
    auto&& sluice_try_r_ = (expr);         \
    if (!sluice_try_r_.ok()) [[unlikely]]  \
      return sluice_try_r_.err();          \
  } while (0)

#define SLUICE_CONCAT_INNER_(a, b) a##b
#define SLUICE_CONCAT_(a, b) SLUICE_CONCAT_INNER_(a, b)
// SLUICE_ASSIGN_OR_RETURN(auto x, f()); declares x from a successful result.
#define SLUICE_ASSIGN_OR_RETURN(decl, expr)                              \
  auto SLUICE_CONCAT_(sluice_r_, __LINE__) = (expr);                     \
  if (!SLUICE_CONCAT_(sluice_r_, __LINE__).ok()) [[unlikely]]            \
    return SLUICE_CONCAT_(sluice_r_, __LINE__).err();                    \
  decl = std::move(SLUICE_CONCAT_(sluice_r_, __LINE__)).value()
