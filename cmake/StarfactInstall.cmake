# Installation: the static libraries behind the public API, their headers under
# include/starfact (the public one is include/starfact/starfact.hpp), the starfact command line,
# a CMake package (find_package(starfact) -> starfact::starfact, which brings StarPU, BLAS/LAPACKE,
# fmt and, in CUDA builds, the CUDA libraries) and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The one target users link; the executable already owns the name "starfact".
add_library(starfact_lib INTERFACE)
set_target_properties(starfact_lib PROPERTIES EXPORT_NAME starfact)
target_link_libraries(starfact_lib INTERFACE starfact_tile starfact_batched starfact_io)
target_include_directories(starfact_lib INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(starfact_lib INTERFACE cxx_std_17)
add_library(starfact::starfact ALIAS starfact_lib)

set(STARFACT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/starfact)
install(TARGETS starfact_lib starfact_tile starfact_batched starfact_io starfact_codelets starfact_common starfact_blas
        EXPORT starfactTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The installed command line keeps finding StarPU (and CUDA) where this build found them.
set_target_properties(starfact PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS starfact RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT starfactTargets NAMESPACE starfact:: DESTINATION ${STARFACT_CMAKE_DIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/starfact/starfact.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/starfact)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/common ${PROJECT_SOURCE_DIR}/tile_algorithms
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/starfact FILES_MATCHING PATTERN "*.hpp")
install(FILES ${PROJECT_SOURCE_DIR}/io/io.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/starfact/io)
install(FILES ${PROJECT_SOURCE_DIR}/batched/batched.hpp ${PROJECT_SOURCE_DIR}/batched/vbatched.hpp
              ${PROJECT_SOURCE_DIR}/batched/uplo.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/starfact/batched)

# StarPU is found through pkg-config; the package remembers where this build found it.
set(STARFACT_STARPU_PKGCONFIG_DIR ${STARPU_PREFIX}/lib/pkgconfig)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/starfactConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/starfactConfig.cmake INSTALL_DESTINATION ${STARFACT_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/starfactConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/starfactConfig.cmake ${PROJECT_BINARY_DIR}/starfactConfigVersion.cmake
        DESTINATION ${STARFACT_CMAKE_DIR})

# pkg-config: static libraries, so every dependency is in Libs.
set(STARFACT_PC_LIBS "-lstarfact_tile -lstarfact_batched -lstarfact_io -lstarfact_codelets -lstarfact_common")
string(APPEND STARFACT_PC_LIBS " ${STARFACT_LAPACKE_LIB} ${STARFACT_OPENBLAS_LIB}")
set(STARFACT_PC_CFLAGS "-I\${includedir}/starfact -I\${includedir} -I${STARFACT_CBLAS_INCLUDE} -I${STARFACT_LAPACKE_INCLUDE}")
if(STARFACT_HAVE_CUDA)
  string(APPEND STARFACT_PC_CFLAGS " -DSTARFACT_HAVE_CUDA=1 -I${CUDAToolkit_INCLUDE_DIRS}")
  string(APPEND STARFACT_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcusolver -lcublas -lcudart")
endif()
string(APPEND STARFACT_PC_LIBS " -lpthread")
# Relocatable: the prefix is found from the .pc file's own place (cmake --install --prefix).
file(RELATIVE_PATH STARFACT_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
configure_file(${PROJECT_SOURCE_DIR}/cmake/starfact.pc.in ${PROJECT_BINARY_DIR}/starfact.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/starfact.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
