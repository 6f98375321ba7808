#pragma once

// Blocking helpers for the broker's administration requests. Each sends one request on the
// given connection and returns the broker's response protobuf, or the broker's Error (code
// and text, e.g. TOPIC_EXISTS, UNKNOWN_GROUP) or a connection error (see connection.h).
// Thread-safe as the connection is; must not be called on the connection's io thread.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "txmq/client/connection.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::client {

struct topic_spec {
  std::string name;
  std::uint32_t partitions = 0;          // 0 = broker default (4)
  std::chrono::milliseconds retention{0};  // 0 = broker default
  std::uint64_t retention_bytes = 0;     // 0 = unlimited
  std::uint32_t replicas = 0;            // cluster mode; 0 = the broker default, min(3, live nodes)
  std::uint32_t min_insync = 0;          // cluster mode; 0 = 2 with >= 3 replicas, else 1
};

class admin {
 public:
  // Shares the connection; request timeout per call as given (connection default otherwise).
  explicit admin(std::shared_ptr<connection> conn, std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  [[nodiscard]] result<v1::TopicInfo> create_topic(const topic_spec& spec);
  [[nodiscard]] result<v1::ListTopicsResponse> list_topics();
  [[nodiscard]] result<v1::TopicInfo> describe_topic(const std::string& name);
  // Changes the settings set in `req` (unset ones stay); answers the settings now in effect. In a
  // cluster any node takes it (the topic's etcd record); errors as docs/protocol.md AlterTopic.
  [[nodiscard]] result<v1::TopicInfo> alter_topic(const v1::AlterTopicRequest& req);

  // A group on `topic`, starting at its earliest retained message, or at its end.
  [[nodiscard]] result<v1::GroupInfo> create_group(const std::string& group, const std::string& topic, bool from_latest = false);
  [[nodiscard]] result<v1::ListGroupsResponse> list_groups();
  [[nodiscard]] result<v1::GroupInfo> describe_group(const std::string& group);

  // Up to `limit` dead letters of the group (0 = broker default, 100).
  [[nodiscard]] result<v1::DlqListResponse> dlq_list(const std::string& group, std::uint32_t limit = 0);
  // One page of a listing continued after req.after_* (DlqListResponse.more says if more follow).
  [[nodiscard]] result<v1::DlqListResponse> dlq_list(const v1::DlqListRequest& req);
  // Moves every dead letter of the group back to delivery; the response says how many.
  [[nodiscard]] result<v1::DlqRedriveResponse> dlq_redrive(const std::string& group);

  // Principals and grants (admin on cluster). create_principal's answer holds the token: the
  // only time the broker shows it.
  [[nodiscard]] result<v1::PrincipalCreateResponse> create_principal(const std::string& name);
  [[nodiscard]] result<v1::PrincipalListResponse> list_principals();
  [[nodiscard]] result<v1::PrincipalDeleteResponse> delete_principal(const std::string& name);
  [[nodiscard]] result<v1::AclChangeResponse> grant(const std::string& principal, const std::string& permission,
                                                    const std::string& resource);
  [[nodiscard]] result<v1::AclChangeResponse> revoke(const std::string& principal, const std::string& permission,
                                                     const std::string& resource);
  // Every grant, or `principal`'s (empty: all).
  [[nodiscard]] result<v1::AclListResponse> list_acls(const std::string& principal = {});

  [[nodiscard]] const std::shared_ptr<connection>& conn() const noexcept { return conn_; }

 private:
  std::shared_ptr<connection> conn_;
  std::optional<std::chrono::milliseconds> timeout_;
};

}  // namespace txmq::client
