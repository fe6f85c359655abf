# Packages with CPack (docs/install.md), from a portable build:
#   cmake -S . -B build-pkg -DTG_NATIVE=OFF -DCMAKE_INSTALL_PREFIX=/usr -DTG_BUILD_TESTS=OFF
#   cmake --build build-pkg -j2 && (cd build-pkg && cpack -G DEB)
# gives three Debian packages, one per install component (cmake/install.cmake):
#   libtapegrad0     the shared libraries                      (runtime)
#   libtapegrad-dev  headers, static libraries, CMake package, pkg-config files, examples
#   tapegrad-tools   transformer_nmt and bahdanau_nmt
# `apt-get install ./libtapegrad*.deb` (or dpkg -i) and an outside project finds tapegrad with
# find_package(tapegrad) and pkg-config, with no prefix path. A build with -march=native
# (TG_NATIVE=ON, the default of a checkout) is refused: its packages would not run on every
# CPU (cpack -D TG_ALLOW_NATIVE_PACKAGE=ON to package it anyway).
set(CPACK_PACKAGE_NAME tapegrad)
set(CPACK_PACKAGE_VENDOR "the tapegrad authors")
set(CPACK_PACKAGE_CONTACT "the tapegrad authors <tapegrad@users.noreply.github.com>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "tape-based reverse-mode autograd in C11 over BLIS, with layers, optimizers and a model zoo")
set(CPACK_PACKAGE_DESCRIPTION
  "tapegrad is a deep-learning framework in C11: a tape-based reverse-mode autograd engine over
BLIS kernels (float32, with float64 twins for gradient checks), generic layers (Linear,
Embedding, LayerNorm, GRU, LSTM, BatchNorm, attention), optimizers (SGD, Adam, AdamW,
schedules), safetensors checkpoints and a model zoo (d2l's Transformer and Bahdanau seq2seq).
License: MIT.")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_RESOURCE_FILE_README ${PROJECT_SOURCE_DIR}/README.md)
set(CPACK_PACKAGE_FILE_NAME tapegrad-${PROJECT_VERSION}-${CMAKE_SYSTEM_PROCESSOR})
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/build[^/]*/")
set(CPACK_COMPONENTS_ALL runtime dev programs)
set(CPACK_COMPONENT_RUNTIME_DISPLAY_NAME "tapegrad shared libraries")
set(CPACK_COMPONENT_DEV_DISPLAY_NAME "tapegrad development files")
set(CPACK_COMPONENT_PROGRAMS_DISPLAY_NAME "tapegrad programs")
set(CPACK_COMPONENT_DEV_DEPENDS runtime)

# Debian
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <package>_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Run-time dependencies, named rather than computed (dpkg-shlibdeps cannot map Debian's BLIS
# alternatives back to a package): any BLIS 4 build (the serial one first), xxHash 0.8, glibc.
set(_tg_deb_runtime_deps "libc6 (>= 2.34), libblis4-serial | libblis.so.4, libxxhash0 (>= 0.8)")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libtapegrad0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "${_tg_deb_runtime_deps}")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libtapegrad-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libtapegrad0 (= ${PROJECT_VERSION}), libblis-serial-dev | libblis-dev | libblis.so, libxxhash-dev (>= 0.8)")
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "pkg-config, cmake")
set(CPACK_DEBIAN_PROGRAMS_PACKAGE_NAME tapegrad-tools)
set(CPACK_DEBIAN_PROGRAMS_PACKAGE_SECTION science)
# tapegrad linked in statically; SentencePiece (the subword vocabularies, zoo/app/subword.h) and
# the C++ runtime it needs are shared libraries
set(CPACK_DEBIAN_PROGRAMS_PACKAGE_DEPENDS "${_tg_deb_runtime_deps}, libsentencepiece0, libstdc++6")
if(TG_MPI_FOUND)  # the programs link Open MPI (docs/distributed.md); mpirun is openmpi-bin's
  string(APPEND CPACK_DEBIAN_PROGRAMS_PACKAGE_DEPENDS ", libopenmpi3")
  set(CPACK_DEBIAN_PROGRAMS_PACKAGE_SUGGESTS "openmpi-bin")
endif()
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)

# Checked when cpack runs (it reads this file with the generator known).
set(TG_PACKAGE_MARCH_NATIVE ${TG_MARCH_NATIVE})
configure_file(${CMAKE_CURRENT_LIST_DIR}/cpack_options.cmake.in
  ${PROJECT_BINARY_DIR}/cpack_options.cmake @ONLY)
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_BINARY_DIR}/cpack_options.cmake)

include(CPack)
