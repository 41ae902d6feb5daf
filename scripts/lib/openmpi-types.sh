# shellcheck shell=bash
# The Open MPI types a types sidecar describes, and the headers that declare them: sourced by
# scripts/openmpi-types-sidecar.sh (Open MPI 4, Debian's headers) and
# scripts/openmpi5-types-sidecar.sh (Open MPI 5, configured source). The types libompi_dbg_msgq.so
# (ompi/debuggers/ompi_msgq_dll.c, ompi_common_dll.c) looks up, and the PML ob1 types
# mpir-mqd's native walker reads for unexpected messages; opal_object_t, opal_class_t and
# mca_base_component_t for the proof of shipped layouts on a process (mpir-mqd/src/layouts).
# shellcheck disable=SC2034  # used by the scripts that source this file
TYPES=(opal_object_t opal_class_t mca_base_component_t opal_list_item_t opal_list_t opal_free_list_item_t opal_free_list_t opal_hash_table_t
    ompi_request_t mca_pml_base_request_t mca_pml_base_send_request_t
    mca_pml_base_recv_request_t opal_pointer_array_t ompi_communicator_t mca_topo_base_module_t
    mca_topo_base_comm_cart_2_2_0_t mca_topo_base_comm_graph_2_2_0_t
    mca_topo_base_comm_dist_graph_2_2_0_t ompi_group_t ompi_status_public_t ompi_datatype_t
    opal_datatype_t
    mca_pml_ob1_comm_t mca_pml_ob1_comm_proc_t mca_pml_ob1_recv_frag_t mca_pml_ob1_hdr_t
    mca_pml_ob1_common_hdr_t mca_pml_ob1_match_hdr_t mca_pml_ob1_rendezvous_hdr_t
    mca_btl_base_segment_t)
HEADERS=(opal/class/opal_object.h opal/mca/mca.h opal/class/opal_list.h opal/class/opal_free_list.h opal/class/opal_hash_table.h
    opal/class/opal_pointer_array.h opal/datatype/opal_datatype.h ompi/request/request.h
    ompi/communicator/communicator.h ompi/group/group.h ompi/datatype/ompi_datatype.h
    ompi/mca/topo/topo.h ompi/mca/pml/base/pml_base_request.h
    ompi/mca/pml/base/pml_base_sendreq.h ompi/mca/pml/base/pml_base_recvreq.h
    ompi/mca/pml/ob1/pml_ob1.h ompi/mca/pml/ob1/pml_ob1_comm.h
    ompi/mca/pml/ob1/pml_ob1_recvfrag.h ompi/mca/pml/ob1/pml_ob1_hdr.h)

