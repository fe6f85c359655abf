# The dependencies. Each failure names the Debian package to install.
#   BLIS      (cmake/FindBLIS.cmake, target BLIS::BLIS)      the engine's products
#   xxHash    (cmake/FindxxHash.cmake, target xxHash::xxhash) nn's checkpoints, the vocabularies
#   Threads   (Threads::Threads)                              the engine's thread pool
#   CUnit     (tg::cunit, only when the tests are built)
# The two Find modules are installed with the package (cmake/install.cmake), so an outside
# project finds BLIS and xxHash exactly as this build did.
list(PREPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")

find_package(BLIS REQUIRED)
find_package(xxHash REQUIRED)
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)

if(TG_BUILD_TESTS)
  find_path(CUNIT_INCLUDE_DIR CUnit/CUnit.h)
  find_library(CUNIT_LIBRARY NAMES cunit)
  if(NOT CUNIT_INCLUDE_DIR OR NOT CUNIT_LIBRARY)
    message(FATAL_ERROR "CUnit not found (CUnit/CUnit.h / libcunit), needed by the tests. "
                        "Install it: apt-get install libcunit1-dev (or configure with -DTG_BUILD_TESTS=OFF)")
  endif()
  add_library(tg::cunit INTERFACE IMPORTED)
  set_target_properties(tg::cunit PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${CUNIT_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${CUNIT_LIBRARY}")
endif()
