# txmq_generate_protos(OUT_VAR PROTO_DIR dir GEN_DIR dir PROTOS rel... [IMPORT_DIRS dir...])
# Runs protoc for each PROTOS path (relative to PROTO_DIR) and puts the generated .pb.h/.pb.cc
# under GEN_DIR with the same relative path, so they are included as "txmq/v1/frame.pb.h".
# (CMake 3.25's protobuf_generate() names its outputs relative to the source dir, not the import
# dir, and so expects files protoc never writes.)
function(txmq_generate_protos out_var)
  cmake_parse_arguments(ARG "" "PROTO_DIR;GEN_DIR" "PROTOS;IMPORT_DIRS" ${ARGN})
  set(includes -I ${ARG_PROTO_DIR})
  foreach(dir IN LISTS ARG_IMPORT_DIRS)
    list(APPEND includes -I ${dir})
  endforeach()
  set(all_abs)
  foreach(proto IN LISTS ARG_PROTOS)
    list(APPEND all_abs ${ARG_PROTO_DIR}/${proto})
  endforeach()
  set(srcs)
  foreach(proto IN LISTS ARG_PROTOS)
    string(REGEX REPLACE "\\.proto$" "" stem ${proto})
    set(outputs ${ARG_GEN_DIR}/${stem}.pb.h ${ARG_GEN_DIR}/${stem}.pb.cc)
    add_custom_command(
      OUTPUT ${outputs}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${ARG_GEN_DIR}
      COMMAND protobuf::protoc --cpp_out=${ARG_GEN_DIR} ${includes} ${ARG_PROTO_DIR}/${proto}
      DEPENDS ${all_abs} protobuf::protoc
      COMMENT "protoc ${proto}"
      VERBATIM)
    list(APPEND srcs ${outputs})
  endforeach()
  set(${out_var} ${srcs} PARENT_SCOPE)
endfunction()
