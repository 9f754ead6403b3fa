#pragma once

// Percent-encoding (RFC 3986) of client-chosen names that must become one
// token of a text format or one path segment of an etcd key: a group id may
// hold any bytes (spaces, '/', '=', newlines), so the group configs' file
// (docs/configuration.md) and their etcd keys (docs/metadata_format.md)
// write it encoded. Letters, digits, '-', '.', '_' and '~' stay as they
// are; every other byte becomes "%XX" with upper-case hex digits, so each
// name has exactly one encoding and the encoding sorts and compares as
// plainly as the names people use ("share-orders" stays "share-orders").
//
// Pure functions; thread-safe.

#include <optional>
#include <string>
#include <string_view>

namespace sluice {

std::string percent_encode(std::string_view raw);

// The name `encoded` stands for, or nullopt when it is not the one encoding
// percent_encode writes (a stray '%', lower-case or missing hex digits, a
// byte that should have been encoded, or one encoded needlessly).
std::optional<std::string> percent_decode(std::string_view encoded);

}  // namespace sluice
