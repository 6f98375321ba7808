#include "txmq/client/admin.h"

#include <string>
#include <utility>

namespace txmq::client {
namespace {

// Sends `request` and returns the response's body `(frame.*get)()` if its type is `expected`.
template <class Response>
result<Response> call(connection& conn, v1::Frame request, std::optional<std::chrono::milliseconds> timeout,
                      v1::Frame::BodyCase expected, const Response& (v1::Frame::*get)() const, const char* what) {
  auto answer = conn.request(std::move(request), timeout);
  if (!answer) return answer.error();
  const v1::Frame& frame = answer.value();
  if (frame.body_case() != expected) {
    // Appended, not chained with +: gcc 12 warns (-Warray-bounds, a false positive) on the
    // chain once inlined into every caller.
    std::string why = "the broker answered ";
    why.append(what).append(" with frame body ").append(std::to_string(static_cast<int>(frame.body_case())));
    return error(errc::unexpected_response, std::move(why));
  }
  return (frame.*get)();
}

}  // namespace

admin::admin(std::shared_ptr<connection> conn, std::optional<std::chrono::milliseconds> timeout)
    : conn_(std::move(conn)), timeout_(timeout) {}

result<v1::TopicInfo> admin::create_topic(const topic_spec& spec) {
  v1::Frame f;
  auto* r = f.mutable_create_topic();
  r->set_name(spec.name);
  r->set_partitions(spec.partitions);
  r->set_retention_ms(spec.retention.count());
  r->set_retention_bytes(spec.retention_bytes);
  r->set_replicas(spec.replicas);
  r->set_min_insync_replicas(spec.min_insync);
  return call(*conn_, std::move(f), timeout_, v1::Frame::kTopicInfo, &v1::Frame::topic_info, "CreateTopic");
}

result<v1::TopicInfo> admin::alter_topic(const v1::AlterTopicRequest& req) {
  v1::Frame f;
  *f.mutable_alter_topic() = req;
  return call(*conn_, std::move(f), timeout_, v1::Frame::kTopicInfo, &v1::Frame::topic_info, "AlterTopic");
}

result<v1::ListTopicsResponse> admin::list_topics() {
  v1::Frame f;
  f.mutable_list_topics();
  return call(*conn_, std::move(f), timeout_, v1::Frame::kListTopicsResponse, &v1::Frame::list_topics_response,
              "ListTopics");
}

result<v1::TopicInfo> admin::describe_topic(const std::string& name) {
  v1::Frame f;
  f.mutable_describe_topic()->set_name(name);
  return call(*conn_, std::move(f), timeout_, v1::Frame::kTopicInfo, &v1::Frame::topic_info, "DescribeTopic");
}

result<v1::GroupInfo> admin::create_group(const std::string& group, const std::string& topic, bool from_latest) {
  v1::Frame f;
  auto* r = f.mutable_create_group();
  r->set_group(group);
  r->set_topic(topic);
  r->set_from_latest(from_latest);
  return call(*conn_, std::move(f), timeout_, v1::Frame::kGroupInfo, &v1::Frame::group_info, "CreateGroup");
}

result<v1::ListGroupsResponse> admin::list_groups() {
  v1::Frame f;
  f.mutable_list_groups();
  return call(*conn_, std::move(f), timeout_, v1::Frame::kListGroupsResponse, &v1::Frame::list_groups_response,
              "ListGroups");
}

result<v1::GroupInfo> admin::describe_group(const std::string& group) {
  v1::Frame f;
  f.mutable_describe_group()->set_group(group);
  return call(*conn_, std::move(f), timeout_, v1::Frame::kGroupInfo, &v1::Frame::group_info, "DescribeGroup");
}

result<v1::DlqListResponse> admin::dlq_list(const v1::DlqListRequest& req) {
  v1::Frame f;
  *f.mutable_dlq_list() = req;
  return call(*conn_, std::move(f), timeout_, v1::Frame::kDlqListResponse, &v1::Frame::dlq_list_response, "DlqList");
}

result<v1::DlqListResponse> admin::dlq_list(const std::string& group, std::uint32_t limit) {
  v1::Frame f;
  f.mutable_dlq_list()->set_group(group);
  f.mutable_dlq_list()->set_limit(limit);
  return call(*conn_, std::move(f), timeout_, v1::Frame::kDlqListResponse, &v1::Frame::dlq_list_response, "DlqList");
}

result<v1::DlqRedriveResponse> admin::dlq_redrive(const std::string& group) {
  v1::Frame f;
  f.mutable_dlq_redrive()->set_group(group);
  return call(*conn_, std::move(f), timeout_, v1::Frame::kDlqRedriveResponse, &v1::Frame::dlq_redrive_response,
              "DlqRedrive");
}

result<v1::PrincipalCreateResponse> admin::create_principal(const std::string& name) {
  v1::Frame f;
  f.mutable_principal_create()->set_name(name);
  return call(*conn_, std::move(f), timeout_, v1::Frame::kPrincipalCreateResponse,
              &v1::Frame::principal_create_response, "PrincipalCreate");
}

result<v1::PrincipalListResponse> admin::list_principals() {
  v1::Frame f;
  f.mutable_principal_list();
  return call(*conn_, std::move(f), timeout_, v1::Frame::kPrincipalListResponse, &v1::Frame::principal_list_response,
              "PrincipalList");
}

result<v1::PrincipalDeleteResponse> admin::delete_principal(const std::string& name) {
  v1::Frame f;
  f.mutable_principal_delete()->set_name(name);
  return call(*conn_, std::move(f), timeout_, v1::Frame::kPrincipalDeleteResponse,
              &v1::Frame::principal_delete_response, "PrincipalDelete");
}

result<v1::AclChangeResponse> admin::grant(const std::string& principal, const std::string& permission,
                                           const std::string& resource) {
  v1::Frame f;
  auto* e = f.mutable_acl_grant()->mutable_entry();
  e->set_principal(principal);
  e->set_permission(permission);
  e->set_resource(resource);
  return call(*conn_, std::move(f), timeout_, v1::Frame::kAclChangeResponse, &v1::Frame::acl_change_response,
              "AclGrant");
}

result<v1::AclChangeResponse> admin::revoke(const std::string& principal, const std::string& permission,
                                            const std::string& resource) {
  v1::Frame f;
  auto* e = f.mutable_acl_revoke()->mutable_entry();
  e->set_principal(principal);
  e->set_permission(permission);
  e->set_resource(resource);
  return call(*conn_, std::move(f), timeout_, v1::Frame::kAclChangeResponse, &v1::Frame::acl_change_response,
              "AclRevoke");
}

result<v1::AclListResponse> admin::list_acls(const std::string& principal) {
  v1::Frame f;
  f.mutable_acl_list()->set_principal(principal);
  return call(*conn_, std::move(f), timeout_, v1::Frame::kAclListResponse, &v1::Frame::acl_list_response, "AclList");
}

}  // namespace txmq::client
