# Finds the three Debian-packaged dependencies. Each failure names the package to install.
# BLIS: Debian ships no blis.pc and no CMake config. Prefer the serial build (lowest per-call
# cost, never fights the caller's threads), then whatever the alternatives system selected.
set(_multiarch "${CMAKE_LIBRARY_ARCHITECTURE}")
find_path(BLIS_INCLUDE_DIR blis.h
  PATHS /usr/include/${_multiarch}/blis-serial NO_DEFAULT_PATH)
find_path(BLIS_INCLUDE_DIR blis.h PATH_SUFFIXES blis)
find_library(BLIS_LIBRARY NAMES blis
  PATHS /usr/lib/${_multiarch}/blis-serial NO_DEFAULT_PATH)
find_library(BLIS_LIBRARY NAMES blis)
if(NOT BLIS_INCLUDE_DIR OR NOT BLIS_LIBRARY)
  message(FATAL_ERROR "BLIS not found (blis.h / libblis). Install it: apt-get install libblis-serial-dev")
endif()
add_library(tg::blis INTERFACE IMPORTED)
set_target_properties(tg::blis PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${BLIS_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES "${BLIS_LIBRARY};m")

find_path(XXHASH_INCLUDE_DIR xxhash.h)
find_library(XXHASH_LIBRARY NAMES xxhash)
if(NOT XXHASH_INCLUDE_DIR OR NOT XXHASH_LIBRARY)
  message(FATAL_ERROR "xxHash not found (xxhash.h / libxxhash). Install it: apt-get install libxxhash-dev")
endif()
add_library(tg::xxhash INTERFACE IMPORTED)
set_target_properties(tg::xxhash PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${XXHASH_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES "${XXHASH_LIBRARY}")

find_path(CUNIT_INCLUDE_DIR CUnit/CUnit.h)
find_library(CUNIT_LIBRARY NAMES cunit)
if(NOT CUNIT_INCLUDE_DIR OR NOT CUNIT_LIBRARY)
  message(FATAL_ERROR "CUnit not found (CUnit/CUnit.h / libcunit). Install it: apt-get install libcunit1-dev")
endif()
add_library(tg::cunit INTERFACE IMPORTED)
set_target_properties(tg::cunit PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${CUNIT_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES "${CUNIT_LIBRARY}")

set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
