# FindxxHash -- finds xxHash (https://github.com/Cyan4973/xxHash): xxhash.h and libxxhash.
# Installed with tapegrad (lib/cmake/tapegrad/) and used by its package configuration.
# Debian's libxxhash-dev ships a libxxhash.pc but no CMake package. The target has the name
# upstream's own CMake package gives it (xxHash::xxhash); an existing one is kept.
#
# Result: xxHash_FOUND, XXHASH_INCLUDE_DIR, XXHASH_LIBRARY, and the imported target
# xxHash::xxhash.
include(FindPackageHandleStandardArgs)

find_path(XXHASH_INCLUDE_DIR xxhash.h)
find_library(XXHASH_LIBRARY NAMES xxhash)
mark_as_advanced(XXHASH_INCLUDE_DIR XXHASH_LIBRARY)

find_package_handle_standard_args(xxHash
  REQUIRED_VARS XXHASH_LIBRARY XXHASH_INCLUDE_DIR
  REASON_FAILURE_MESSAGE
    "xxHash (xxhash.h, libxxhash) is needed. Install it: apt-get install libxxhash-dev (Debian), or point xxHash_ROOT at an installed xxHash.")

if(xxHash_FOUND AND NOT TARGET xxHash::xxhash)
  add_library(xxHash::xxhash UNKNOWN IMPORTED)
  set_target_properties(xxHash::xxhash PROPERTIES
    IMPORTED_LOCATION "${XXHASH_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${XXHASH_INCLUDE_DIR}")
endif()
