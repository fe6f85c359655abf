# What `cmake --install` puts under the prefix (docs/install.md), in three components (the
# Debian packages of cmake/package.cmake):
#   runtime   lib/libtapegrad_*.so.<version> and their SONAME links; share/doc/tapegrad/LICENSE
#   dev       include/tapegrad/ (the public headers), lib/libtapegrad_*.a, lib/libtapegrad_*.so,
#             lib/cmake/tapegrad/ (package configuration, version, targets, FindBLIS and
#             FindxxHash), lib/pkgconfig/tapegrad*.pc, share/doc/tapegrad/examples/
#   programs  bin/transformer_nmt, bin/bahdanau_nmt
# The libraries' own rules are in cmake/twin.cmake, the programs' in zoo/app/CMakeLists.txt.
include(CMakePackageConfigHelpers)

# ---- headers: include/tapegrad/<folder>/<header>.h, as the sources lay them out ---------------
foreach(h IN LISTS TG_PUBLIC_HEADERS)
  get_filename_component(dir ${h} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${h}
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tapegrad/${dir} COMPONENT dev)
endforeach()

# ---- the CMake package -------------------------------------------------------------------------
# The components (libraries) in dependency order, each with the tapegrad libraries it needs and
# the outside packages its static library brings (twin.cmake recorded them).
get_property(TG_COMPONENTS GLOBAL PROPERTY TG_COMPONENTS)
set(TG_CONFIG_TABLE "")
foreach(c IN LISTS TG_COMPONENTS)
  get_property(deps GLOBAL PROPERTY TG_COMPONENT_DEPS_${c})
  get_property(ext GLOBAL PROPERTY TG_COMPONENT_EXTERNAL_${c})
  get_property(single GLOBAL PROPERTY TG_COMPONENT_SINGLE_${c})
  set(pkgs "")
  foreach(e IN LISTS ext)
    if(e STREQUAL "BLIS::BLIS")
      list(APPEND pkgs BLIS)
    elseif(e STREQUAL "xxHash::xxhash")
      list(APPEND pkgs xxHash)
    elseif(e STREQUAL "Threads::Threads")
      list(APPEND pkgs Threads)
    endif()
  endforeach()
  if(single)
    set(twin FALSE)
  else()
    set(twin TRUE)
  endif()
  string(APPEND TG_CONFIG_TABLE
    "set(_tg_deps_${c} \"${deps}\")\nset(_tg_pkgs_${c} \"${pkgs}\")\nset(_tg_twin_${c} ${twin})\n")
endforeach()
set(TG_CONFIG_SHARED ${TG_BUILD_SHARED})
string(REPLACE ";" ", " TG_COMPONENTS_LIST "${TG_COMPONENTS}")

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tapegradConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/tapegradConfig.cmake
  INSTALL_DESTINATION ${TG_INSTALL_CMAKEDIR})
# 0.x: a minor version may break the interface.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/tapegradConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
    ${PROJECT_BINARY_DIR}/cmake/tapegradConfig.cmake
    ${PROJECT_BINARY_DIR}/cmake/tapegradConfigVersion.cmake
    ${CMAKE_CURRENT_LIST_DIR}/FindBLIS.cmake
    ${CMAKE_CURRENT_LIST_DIR}/FindxxHash.cmake
  DESTINATION ${TG_INSTALL_CMAKEDIR} COMPONENT dev)

# ---- pkg-config ----------------------------------------------------------------------------------
# One module per library (tapegrad-ag, tapegrad-nn64, tapegrad-ag-base ...) and two umbrellas:
# tapegrad (every float32 library) and tapegrad64 (every float64 twin, -DTG_DOUBLE=1).
#   cc main.c $(pkg-config --cflags --libs tapegrad)                   shared libraries
#   cc -static main.c $(pkg-config --static --cflags --libs tapegrad)  static: Libs.private
# The prefix is written at install time (the one given to cmake --install, or /usr in a
# package), so the files hold plain absolute paths (-I/usr/include is then left out by
# pkg-config: an explicit one would break #include_next in C++'s headers).

# "-L<dir> -l<name>" for a library file, without -L when the linker searches <dir> anyway (or
# when Debian's alternatives put a link to it there: BLIS's serial, pthread and openmp builds).
function(tg_pc_lib_flags out file name)
  get_filename_component(dir "${file}" DIRECTORY)
  get_filename_component(parent "${dir}" DIRECTORY)
  if(dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES OR
     (parent IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES AND EXISTS "${parent}/lib${name}.so"))
    set(${out} "-l${name}" PARENT_SCOPE)
  else()
    set(${out} "-L${dir} -l${name}" PARENT_SCOPE)
  endif()
endfunction()
tg_pc_lib_flags(_tg_pc_blis "${BLIS_LIBRARY}" blis)
# What a static link of that BLIS needs besides (FindBLIS's BLIS_NEEDS, read from its symbols):
# an OpenMP build (libblis-openmp-dev) calls omp_get_thread_num and GOMP_*: the compiler's
# OpenMP flag (-fopenmp: libgomp and pthreads); the serial and pthreads builds call pthread_*.
if("OpenMP" IN_LIST BLIS_NEEDS)
  if(OpenMP_C_FLAGS)
    string(APPEND _tg_pc_blis " ${OpenMP_C_FLAGS}")
  else()
    string(APPEND _tg_pc_blis " -lgomp")
  endif()
endif()
if("Threads" IN_LIST BLIS_NEEDS OR "OpenMP" IN_LIST BLIS_NEEDS)
  string(APPEND _tg_pc_blis " -pthread")
endif()
# Written into the .pc of the libraries that link BLIS (pkg-config --variable=blis_needs
# tapegrad-ag), for checks (tests/install/check_install.sh) and the curious.
get_filename_component(_tg_blis_real "${BLIS_LIBRARY}" REALPATH)
string(REPLACE ";" " " _tg_pc_blis_needs "${BLIS_NEEDS}")
set(_tg_pc_blis_vars "blis_library=${_tg_blis_real}\nblis_needs=${_tg_pc_blis_needs}\n")
tg_pc_lib_flags(_tg_pc_xxhash "${XXHASH_LIBRARY}" xxhash)

if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(_tg_pc_libdir "${CMAKE_INSTALL_LIBDIR}")
else()
  set(_tg_pc_libdir "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(_tg_pc_includedir "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(_tg_pc_includedir "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()

set(_tg_pc_dir ${PROJECT_BINARY_DIR}/pkgconfig)
set(_tg_pc_names "")
# tg_pc_write(<module> <description> <requires> <libs> <libs.private> <cflags> [vars]): a template
# with @TG_PC_PREFIX@ for the install-time prefix.
# An optional 7th argument: more variable lines ("name=value\n"), after includedir.
function(tg_pc_write module description requires libs libs_private cflags)
  set(text "prefix=@TG_PC_PREFIX@\nlibdir=${_tg_pc_libdir}\nincludedir=${_tg_pc_includedir}\n${ARGV6}\n")
  string(APPEND text "Name: ${module}\nDescription: ${description}\nVersion: ${PROJECT_VERSION}\n")
  if(requires)
    string(APPEND text "Requires: ${requires}\n")
  endif()
  if(libs)
    string(APPEND text "Libs: ${libs}\n")
  endif()
  if(libs_private)
    string(APPEND text "Libs.private: ${libs_private}\n")
  endif()
  string(APPEND text "Cflags: -I\${includedir}${cflags}\n")
  file(WRITE ${_tg_pc_dir}/${module}.pc.in "${text}")
  set(_tg_pc_names ${_tg_pc_names} ${module} PARENT_SCOPE)
endfunction()

function(tg_pc_module_name out lib)
  string(REPLACE "_" "-" m "${lib}")
  set(${out} tapegrad-${m} PARENT_SCOPE)
endfunction()

set(_tg_umbrella32 "")
set(_tg_umbrella64 "")
foreach(c IN LISTS TG_COMPONENTS)
  get_property(deps GLOBAL PROPERTY TG_COMPONENT_DEPS_${c})
  get_property(ext GLOBAL PROPERTY TG_COMPONENT_EXTERNAL_${c})
  get_property(single GLOBAL PROPERTY TG_COMPONENT_SINGLE_${c})
  set(private "")
  set(vars "")
  foreach(e IN LISTS ext)
    if(e STREQUAL "BLIS::BLIS")
      string(APPEND private " ${_tg_pc_blis}")
      set(vars "${_tg_pc_blis_vars}")
    elseif(e STREQUAL "xxHash::xxhash")
      string(APPEND private " ${_tg_pc_xxhash}")
    elseif(e STREQUAL "Threads::Threads" AND NOT private MATCHES " -pthread")
      string(APPEND private " -pthread")
    elseif(e STREQUAL "m")
      string(APPEND private " -lm")
    endif()
  endforeach()
  string(STRIP "${private}" private)
  foreach(v "" "64")
    if(v STREQUAL "64" AND single)
      continue()
    endif()
    set(req "")
    foreach(d IN LISTS deps)
      get_property(dsingle GLOBAL PROPERTY TG_COMPONENT_SINGLE_${d})
      if(dsingle)
        tg_pc_module_name(dm ${d})
      else()
        tg_pc_module_name(dm ${d}${v})
      endif()
      list(APPEND req ${dm})
    endforeach()
    string(REPLACE ";" ", " req "${req}")
    set(cflags "")
    set(what "float32")
    if(v STREQUAL "64")
      set(cflags " -DTG_DOUBLE=1")
      set(what "float64 twin")
    elseif(single)
      set(what "no precision")
    endif()
    tg_pc_module_name(module ${c}${v})
    tg_pc_write(${module} "tapegrad's ${c} library (${what})" "${req}"
      "-L\${libdir} -ltapegrad_${c}${v}" "${private}" "${cflags}" "${vars}")
    if(NOT v STREQUAL "64")
      list(APPEND _tg_umbrella32 ${module})
    endif()
    if(v STREQUAL "64" OR single)
      list(APPEND _tg_umbrella64 ${module})
    endif()
  endforeach()
endforeach()
string(REPLACE ";" ", " _tg_umbrella32 "${_tg_umbrella32}")
string(REPLACE ";" ", " _tg_umbrella64 "${_tg_umbrella64}")
tg_pc_write(tapegrad "tapegrad: every library (float32)" "${_tg_umbrella32}" "" "" "")
tg_pc_write(tapegrad64 "tapegrad: every library, float64 twins (TG_DOUBLE)" "${_tg_umbrella64}" "" "" " -DTG_DOUBLE=1")

set(_tg_pc_files "")
foreach(m IN LISTS _tg_pc_names)
  list(APPEND _tg_pc_files ${_tg_pc_dir}/installed/${m}.pc)
endforeach()
install(CODE "
  set(TG_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  foreach(m ${_tg_pc_names})
    configure_file(\"${_tg_pc_dir}/\${m}.pc.in\" \"${_tg_pc_dir}/installed/\${m}.pc\" @ONLY)
  endforeach()" COMPONENT dev)
install(FILES ${_tg_pc_files} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# ---- documentation -------------------------------------------------------------------------------
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
  COMPONENT dev)

# A native build installs libraries that may not run on another CPU: say so.
if(TG_MARCH_NATIVE)
  install(CODE "message(WARNING \"tapegrad was built with -march=native (TG_NATIVE=ON): the installed \"
    \"libraries and programs may not run on another CPU. For a portable install, configure with -DTG_NATIVE=OFF.\")")
endif()
