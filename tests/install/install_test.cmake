# The install/consumer test: `cmake --install` of the build into a fresh prefix
# must stay inside it and install exactly the public headers; then a project
# outside the tree (consumer/) finds gandiva with find_package, links
# gandiva::gandiva, builds and runs.
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DCONSUMER_DIR=... -DCXX=... [-DSANITIZE=...] -P install_test.cmake
foreach(var BUILD_DIR WORK_DIR CONSUMER_DIR CXX)
  if(NOT ${var})
    message(FATAL_ERROR "install_test: -D${var}= is required")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "install_test: `${cmd}` failed (${rc}):\n${out}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# 1. Everything the install writes lands under the prefix.
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
file(STRINGS ${BUILD_DIR}/install_manifest.txt installed)
if(NOT installed)
  message(FATAL_ERROR "install_test: the install wrote nothing")
endif()
foreach(f IN LISTS installed)
  string(FIND "${f}" "${prefix}/" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "install_test: installed outside the prefix ${prefix}: ${f}")
  endif()
endforeach()

# 2. The include tree is the public API and nothing else.
file(GLOB_RECURSE headers LIST_DIRECTORIES false RELATIVE ${prefix}/include ${prefix}/include/*)
list(SORT headers)
if(NOT headers STREQUAL "gandiva/gandiva.h;gandiva/gandiva.hpp")
  message(FATAL_ERROR "install_test: include/ should hold exactly gandiva/gandiva.h and "
                      "gandiva/gandiva.hpp, but holds: ${headers}")
endif()

# 3. An outside project: find_package(gandiva), gandiva::gandiva, runs unmanaged.
set(consumer_flags)
if(SANITIZE)
  # libgandiva.so is instrumented: so must the program be (its runtime first).
  list(APPEND consumer_flags "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZE}")
endif()
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${consumer_flags})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
file(MAKE_DIRECTORY ${WORK_DIR}/ckpt)
unset(ENV{GANDIVA_CONTROL_BLOCK})  # unmanaged, even when run under a controller
run(${WORK_DIR}/consumer/app ${WORK_DIR}/ckpt)
message(STATUS "install_test: app printed:\n${out}")
foreach(expected "managed=0 job_id=0 iterations=4 mean_ms_positive=1"
                 "registered=1 checkpoint=1")
  if(NOT out MATCHES "${expected}")
    message(FATAL_ERROR "install_test: the app's output lacks /${expected}/:\n${out}")
  endif()
endforeach()
if(NOT EXISTS ${WORK_DIR}/ckpt/state.gdck)
  message(FATAL_ERROR "install_test: gd_checkpoint wrote no ${WORK_DIR}/ckpt/state.gdck")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
