"""The per-GPU block of `nvidia-smi -q -x` (DTD nvsmi_device_v13).

Element order, nesting and the values that do not vary per machine are those of real output recorded
with driver 580.159.04 on 2x H200 (recording tests/fixtures/nvidia-smi/h200-x2/nvidia-smi-q-x.xml).
Each leaf is a placeholder; XML_BASE holds the recorded H200 values, which profiles and live state override.
"""

XML_GPU_TEMPLATE = """\
	<gpu id="{bus_id}">
		<product_name>{product_name}</product_name>
		<product_brand>{product_brand}</product_brand>
		<product_architecture>{product_architecture}</product_architecture>
		<display_mode>{display_mode}</display_mode>
		<display_attached>{display_attached}</display_attached>
		<display_active>{display_active}</display_active>
		<persistence_mode>{persistence_mode}</persistence_mode>
		<addressing_mode>{addressing_mode}</addressing_mode>
		<mig_mode>
			<current_mig>{mig_mode__current_mig}</current_mig>
			<pending_mig>{mig_mode__pending_mig}</pending_mig>
		</mig_mode>
		<mig_devices>
			None
		</mig_devices>
		<accounting_mode>{accounting_mode}</accounting_mode>
		<accounting_mode_buffer_size>{accounting_mode_buffer_size}</accounting_mode_buffer_size>
		<driver_model>
			<current_dm>{driver_model__current_dm}</current_dm>
			<pending_dm>{driver_model__pending_dm}</pending_dm>
		</driver_model>
		<serial>{serial}</serial>
		<uuid>{uuid}</uuid>
		<pdi>{pdi}</pdi>
		<minor_number>{minor_number}</minor_number>
		<vbios_version>{vbios_version}</vbios_version>
		<multigpu_board>{multigpu_board}</multigpu_board>
		<board_id>{board_id}</board_id>
		<board_part_number>{board_part_number}</board_part_number>
		<gpu_part_number>{gpu_part_number}</gpu_part_number>
		<gpu_fru_part_number>{gpu_fru_part_number}</gpu_fru_part_number>
		<platformInfo>
			<chassis_serial_number>{platformInfo__chassis_serial_number}</chassis_serial_number>
			<slot_number>{platformInfo__slot_number}</slot_number>
			<tray_index>{platformInfo__tray_index}</tray_index>
			<host_id>{platformInfo__host_id}</host_id>
			<peer_type>{platformInfo__peer_type}</peer_type>
			<module_id>{platformInfo__module_id}</module_id>
			<gpu_fabric_guid>{platformInfo__gpu_fabric_guid}</gpu_fabric_guid>
		</platformInfo>
		<inforom_version>
			<img_version>{inforom_version__img_version}</img_version>
			<oem_object>{inforom_version__oem_object}</oem_object>
			<ecc_object>{inforom_version__ecc_object}</ecc_object>
			<pwr_object>{inforom_version__pwr_object}</pwr_object>
		</inforom_version>
		<inforom_bbx_flush>
			<latest_timestamp>{inforom_bbx_flush__latest_timestamp}</latest_timestamp>
			<latest_duration>{inforom_bbx_flush__latest_duration}</latest_duration>
		</inforom_bbx_flush>
		<gpu_operation_mode>
			<current_gom>{gpu_operation_mode__current_gom}</current_gom>
			<pending_gom>{gpu_operation_mode__pending_gom}</pending_gom>
		</gpu_operation_mode>
		<c2c_mode>Disabled</c2c_mode>
		<gpu_virtualization_mode>
			<virtualization_mode>{gpu_virtualization_mode__virtualization_mode}</virtualization_mode>
			<host_vgpu_mode>{gpu_virtualization_mode__host_vgpu_mode}</host_vgpu_mode>
			<vgpu_heterogeneous_mode>{gpu_virtualization_mode__vgpu_heterogeneous_mode}</vgpu_heterogeneous_mode>
		</gpu_virtualization_mode>
		<gpu_recovery_action>{gpu_recovery_action}</gpu_recovery_action>
		<gsp_firmware_version>{gsp_firmware_version}</gsp_firmware_version>
		<ibmnpu>
			<relaxed_ordering_mode>{ibmnpu__relaxed_ordering_mode}</relaxed_ordering_mode>
		</ibmnpu>
		<pci>
			<pci_bus>{pci__pci_bus}</pci_bus>
			<pci_device>{pci__pci_device}</pci_device>
			<pci_domain>{pci__pci_domain}</pci_domain>
			<pci_base_class>{pci__pci_base_class}</pci_base_class>
			<pci_sub_class>{pci__pci_sub_class}</pci_sub_class>
			<pci_device_id>{pci__pci_device_id}</pci_device_id>
			<pci_bus_id>{pci__pci_bus_id}</pci_bus_id>
			<pci_sub_system_id>{pci__pci_sub_system_id}</pci_sub_system_id>
			<pci_gpu_link_info>
				<pcie_gen>
					<max_link_gen>{pci__pci_gpu_link_info__pcie_gen__max_link_gen}</max_link_gen>
					<current_link_gen>{pci__pci_gpu_link_info__pcie_gen__current_link_gen}</current_link_gen>
					<device_current_link_gen>{pci__pci_gpu_link_info__pcie_gen__device_current_link_gen}</device_current_link_gen>
					<max_device_link_gen>{pci__pci_gpu_link_info__pcie_gen__max_device_link_gen}</max_device_link_gen>
					<max_host_link_gen>{pci__pci_gpu_link_info__pcie_gen__max_host_link_gen}</max_host_link_gen>
				</pcie_gen>
				<link_widths>
					<max_link_width>{pci__pci_gpu_link_info__link_widths__max_link_width}</max_link_width>
					<current_link_width>{pci__pci_gpu_link_info__link_widths__current_link_width}</current_link_width>
				</link_widths>
			</pci_gpu_link_info>
			<pci_bridge_chip>
				<bridge_chip_type>{pci__pci_bridge_chip__bridge_chip_type}</bridge_chip_type>
				<bridge_chip_fw>{pci__pci_bridge_chip__bridge_chip_fw}</bridge_chip_fw>
			</pci_bridge_chip>
			<replay_counter>{pci__replay_counter}</replay_counter>
			<replay_rollover_counter>{pci__replay_rollover_counter}</replay_rollover_counter>
			<tx_util>{pci__tx_util}</tx_util>
			<rx_util>{pci__rx_util}</rx_util>
			<atomic_caps_outbound>{pci__atomic_caps_outbound}</atomic_caps_outbound>
			<atomic_caps_inbound>{pci__atomic_caps_inbound}</atomic_caps_inbound>
		</pci>
		<fan_speed>{fan_speed}</fan_speed>
		<performance_state>{performance_state}</performance_state>
		<clocks_event_reasons>
			<clocks_event_reason_gpu_idle>{clocks_event_reasons__clocks_event_reason_gpu_idle}</clocks_event_reason_gpu_idle>
			<clocks_event_reason_applications_clocks_setting>{clocks_event_reasons__clocks_event_reason_applications_clocks_setting}</clocks_event_reason_applications_clocks_setting>
			<clocks_event_reason_sw_power_cap>{clocks_event_reasons__clocks_event_reason_sw_power_cap}</clocks_event_reason_sw_power_cap>
			<clocks_event_reason_hw_slowdown>{clocks_event_reasons__clocks_event_reason_hw_slowdown}</clocks_event_reason_hw_slowdown>
			<clocks_event_reason_hw_thermal_slowdown>{clocks_event_reasons__clocks_event_reason_hw_thermal_slowdown}</clocks_event_reason_hw_thermal_slowdown>
			<clocks_event_reason_hw_power_brake_slowdown>{clocks_event_reasons__clocks_event_reason_hw_power_brake_slowdown}</clocks_event_reason_hw_power_brake_slowdown>
			<clocks_event_reason_sync_boost>{clocks_event_reasons__clocks_event_reason_sync_boost}</clocks_event_reason_sync_boost>
			<clocks_event_reason_sw_thermal_slowdown>{clocks_event_reasons__clocks_event_reason_sw_thermal_slowdown}</clocks_event_reason_sw_thermal_slowdown>
			<clocks_event_reason_display_clocks_setting>{clocks_event_reasons__clocks_event_reason_display_clocks_setting}</clocks_event_reason_display_clocks_setting>
		</clocks_event_reasons>
		<clocks_event_reasons_counters>
			<clocks_event_reasons_counters_sw_power_cap>{clocks_event_reasons_counters__clocks_event_reasons_counters_sw_power_cap}</clocks_event_reasons_counters_sw_power_cap>
			<clocks_event_reasons_counters_sync_boost>{clocks_event_reasons_counters__clocks_event_reasons_counters_sync_boost}</clocks_event_reasons_counters_sync_boost>
			<clocks_event_reasons_counters_sw_therm_slowdown>{clocks_event_reasons_counters__clocks_event_reasons_counters_sw_therm_slowdown}</clocks_event_reasons_counters_sw_therm_slowdown>
			<clocks_event_reasons_counters_hw_therm_slowdown>{clocks_event_reasons_counters__clocks_event_reasons_counters_hw_therm_slowdown}</clocks_event_reasons_counters_hw_therm_slowdown>
			<clocks_event_reasons_counters_hw_power_brake>{clocks_event_reasons_counters__clocks_event_reasons_counters_hw_power_brake}</clocks_event_reasons_counters_hw_power_brake>
		</clocks_event_reasons_counters>
		<sparse_operation_mode>{sparse_operation_mode}</sparse_operation_mode>
		<fb_memory_usage>
			<total>{fb_memory_usage__total}</total>
			<reserved>{fb_memory_usage__reserved}</reserved>
			<used>{fb_memory_usage__used}</used>
			<free>{fb_memory_usage__free}</free>
		</fb_memory_usage>
		<bar1_memory_usage>
			<total>{total}</total>
			<used>{used}</used>
			<free>{free}</free>
		</bar1_memory_usage>
		<cc_protected_memory_usage>
			<total>{cc_protected_memory_usage__total}</total>
			<used>{cc_protected_memory_usage__used}</used>
			<free>{cc_protected_memory_usage__free}</free>
		</cc_protected_memory_usage>
		<compute_mode>{compute_mode}</compute_mode>
		<utilization>
			<gpu_util>{utilization__gpu_util}</gpu_util>
			<memory_util>{utilization__memory_util}</memory_util>
			<encoder_util>{utilization__encoder_util}</encoder_util>
			<decoder_util>{utilization__decoder_util}</decoder_util>
			<jpeg_util>{utilization__jpeg_util}</jpeg_util>
			<ofa_util>{utilization__ofa_util}</ofa_util>
		</utilization>
		<encoder_stats>
			<session_count>{encoder_stats__session_count}</session_count>
			<average_fps>{encoder_stats__average_fps}</average_fps>
			<average_latency>{encoder_stats__average_latency}</average_latency>
		</encoder_stats>
		<fbc_stats>
			<session_count>{fbc_stats__session_count}</session_count>
			<average_fps>{fbc_stats__average_fps}</average_fps>
			<average_latency>{fbc_stats__average_latency}</average_latency>
		</fbc_stats>
		<dram_encryption_mode>
			<current_dram_encryption>{dram_encryption_mode__current_dram_encryption}</current_dram_encryption>
			<pending_dram_encryption>{dram_encryption_mode__pending_dram_encryption}</pending_dram_encryption>
		</dram_encryption_mode>
		<ecc_mode>
			<current_ecc>{ecc_mode__current_ecc}</current_ecc>
			<pending_ecc>{ecc_mode__pending_ecc}</pending_ecc>
		</ecc_mode>
		<ecc_errors>
			<volatile>
				<sram_correctable>{ecc_errors__volatile__sram_correctable}</sram_correctable>
				<sram_uncorrectable_parity>{ecc_errors__volatile__sram_uncorrectable_parity}</sram_uncorrectable_parity>
				<sram_uncorrectable_secded>{ecc_errors__volatile__sram_uncorrectable_secded}</sram_uncorrectable_secded>
				<dram_correctable>{ecc_errors__volatile__dram_correctable}</dram_correctable>
				<dram_uncorrectable>{ecc_errors__volatile__dram_uncorrectable}</dram_uncorrectable>
			</volatile>
			<aggregate>
				<sram_correctable>{ecc_errors__aggregate__sram_correctable}</sram_correctable>
				<sram_uncorrectable_parity>{ecc_errors__aggregate__sram_uncorrectable_parity}</sram_uncorrectable_parity>
				<sram_uncorrectable_secded>{ecc_errors__aggregate__sram_uncorrectable_secded}</sram_uncorrectable_secded>
				<dram_correctable>{ecc_errors__aggregate__dram_correctable}</dram_correctable>
				<dram_uncorrectable>{ecc_errors__aggregate__dram_uncorrectable}</dram_uncorrectable>
				<sram_threshold_exceeded>{ecc_errors__aggregate__sram_threshold_exceeded}</sram_threshold_exceeded>
			</aggregate>
			<aggregate_uncorrectable_sram_sources>
				<sram_l2>0</sram_l2>
				<sram_sm>{ecc_errors__aggregate_uncorrectable_sram_sources__sram_sm}</sram_sm>
				<sram_microcontroller>{ecc_errors__aggregate_uncorrectable_sram_sources__sram_microcontroller}</sram_microcontroller>
				<sram_pcie>{ecc_errors__aggregate_uncorrectable_sram_sources__sram_pcie}</sram_pcie>
				<sram_other>{ecc_errors__aggregate_uncorrectable_sram_sources__sram_other}</sram_other>
			</aggregate_uncorrectable_sram_sources>
			<channel_repair_pending>{ecc_errors__channel_repair_pending}</channel_repair_pending>
			<tpc_repair_pending>{ecc_errors__tpc_repair_pending}</tpc_repair_pending>
			<unrepairable_memory>{ecc_errors__unrepairable_memory}</unrepairable_memory>
		</ecc_errors>
		<retired_pages>
			<multiple_single_bit_retirement>
				<retired_count>{retired_pages__multiple_single_bit_retirement__retired_count}</retired_count>
				<retired_pagelist>{retired_pages__multiple_single_bit_retirement__retired_pagelist}</retired_pagelist>
			</multiple_single_bit_retirement>
			<double_bit_retirement>
				<retired_count>{retired_pages__double_bit_retirement__retired_count}</retired_count>
				<retired_pagelist>{retired_pages__double_bit_retirement__retired_pagelist}</retired_pagelist>
			</double_bit_retirement>
			<pending_blacklist>{retired_pages__pending_blacklist}</pending_blacklist>
			<pending_retirement>{retired_pages__pending_retirement}</pending_retirement>
		</retired_pages>
		<remapped_rows>
			<remapped_row_corr>{remapped_rows__remapped_row_corr}</remapped_row_corr>
			<remapped_row_corr_inactive>{remapped_rows__remapped_row_corr_inactive}</remapped_row_corr_inactive>
			<remapped_row_unc>{remapped_rows__remapped_row_unc}</remapped_row_unc>
			<remapped_row_unc_inactive>{remapped_rows__remapped_row_unc_inactive}</remapped_row_unc_inactive>
			<remapped_row_pending>{remapped_rows__remapped_row_pending}</remapped_row_pending>
			<remapped_row_failure>{remapped_rows__remapped_row_failure}</remapped_row_failure>
			<row_remapper_histogram>
				<row_remapper_histogram_max>{remapped_rows__row_remapper_histogram__row_remapper_histogram_max}</row_remapper_histogram_max>
				<row_remapper_histogram_high>{remapped_rows__row_remapper_histogram__row_remapper_histogram_high}</row_remapper_histogram_high>
				<row_remapper_histogram_partial>{remapped_rows__row_remapper_histogram__row_remapper_histogram_partial}</row_remapper_histogram_partial>
				<row_remapper_histogram_low>{remapped_rows__row_remapper_histogram__row_remapper_histogram_low}</row_remapper_histogram_low>
				<row_remapper_histogram_none>{remapped_rows__row_remapper_histogram__row_remapper_histogram_none}</row_remapper_histogram_none>
			</row_remapper_histogram>
		</remapped_rows>
		<temperature>
			<gpu_temp>{temperature__gpu_temp}</gpu_temp>
			<gpu_temp_tlimit>{temperature__gpu_temp_tlimit}</gpu_temp_tlimit>
			<gpu_temp_max_tlimit_threshold>{temperature__gpu_temp_max_tlimit_threshold}</gpu_temp_max_tlimit_threshold>
			<gpu_temp_slow_tlimit_threshold>{temperature__gpu_temp_slow_tlimit_threshold}</gpu_temp_slow_tlimit_threshold>
			<gpu_temp_max_gpu_tlimit_threshold>{temperature__gpu_temp_max_gpu_tlimit_threshold}</gpu_temp_max_gpu_tlimit_threshold>
			<gpu_target_temperature>{temperature__gpu_target_temperature}</gpu_target_temperature>
			<memory_temp>{temperature__memory_temp}</memory_temp>
			<gpu_temp_max_mem_tlimit_threshold>{temperature__gpu_temp_max_mem_tlimit_threshold}</gpu_temp_max_mem_tlimit_threshold>
		</temperature>
		<supported_gpu_target_temp>
			<gpu_target_temp_min>{supported_gpu_target_temp__gpu_target_temp_min}</gpu_target_temp_min>
			<gpu_target_temp_max>{supported_gpu_target_temp__gpu_target_temp_max}</gpu_target_temp_max>
		</supported_gpu_target_temp>
		<gpu_power_readings>
			<power_state>{gpu_power_readings__power_state}</power_state>
			<average_power_draw>{gpu_power_readings__average_power_draw}</average_power_draw>
			<instant_power_draw>{gpu_power_readings__instant_power_draw}</instant_power_draw>
			<current_power_limit>{gpu_power_readings__current_power_limit}</current_power_limit>
			<requested_power_limit>{gpu_power_readings__requested_power_limit}</requested_power_limit>
			<default_power_limit>{gpu_power_readings__default_power_limit}</default_power_limit>
			<min_power_limit>{gpu_power_readings__min_power_limit}</min_power_limit>
			<max_power_limit>{gpu_power_readings__max_power_limit}</max_power_limit>
		</gpu_power_readings>
		<gpu_memory_power_readings>
			<average_power_draw>{gpu_memory_power_readings__average_power_draw}</average_power_draw>
			<instant_power_draw>{gpu_memory_power_readings__instant_power_draw}</instant_power_draw>
		</gpu_memory_power_readings>
		<module_power_readings>
			<power_state>{module_power_readings__power_state}</power_state>
			<average_power_draw>{module_power_readings__average_power_draw}</average_power_draw>
			<instant_power_draw>{module_power_readings__instant_power_draw}</instant_power_draw>
			<current_power_limit>{module_power_readings__current_power_limit}</current_power_limit>
			<requested_power_limit>{module_power_readings__requested_power_limit}</requested_power_limit>
			<default_power_limit>{module_power_readings__default_power_limit}</default_power_limit>
			<min_power_limit>{module_power_readings__min_power_limit}</min_power_limit>
			<max_power_limit>{module_power_readings__max_power_limit}</max_power_limit>
		</module_power_readings>
		<power_smoothing>{power_smoothing}</power_smoothing>
		<power_profiles>
			<power_profile_requested_profiles>{power_profiles__power_profile_requested_profiles}</power_profile_requested_profiles>
			<power_profile_enforced_profiles>{power_profiles__power_profile_enforced_profiles}</power_profile_enforced_profiles>
		</power_profiles>
		<clocks>
			<graphics_clock>{clocks__graphics_clock}</graphics_clock>
			<sm_clock>{clocks__sm_clock}</sm_clock>
			<mem_clock>{clocks__mem_clock}</mem_clock>
			<video_clock>{clocks__video_clock}</video_clock>
		</clocks>
		<applications_clocks>
			<graphics_clock>{applications_clocks__graphics_clock}</graphics_clock>
			<mem_clock>{applications_clocks__mem_clock}</mem_clock>
		</applications_clocks>
		<default_applications_clocks>
			<graphics_clock>{default_applications_clocks__graphics_clock}</graphics_clock>
			<mem_clock>{default_applications_clocks__mem_clock}</mem_clock>
		</default_applications_clocks>
		<deferred_clocks>
			<mem_clock>{deferred_clocks__mem_clock}</mem_clock>
		</deferred_clocks>
		<max_clocks>
			<graphics_clock>{max_clocks__graphics_clock}</graphics_clock>
			<sm_clock>{max_clocks__sm_clock}</sm_clock>
			<mem_clock>{max_clocks__mem_clock}</mem_clock>
			<video_clock>{max_clocks__video_clock}</video_clock>
		</max_clocks>
		<max_customer_boost_clocks>
			<graphics_clock>{max_customer_boost_clocks__graphics_clock}</graphics_clock>
		</max_customer_boost_clocks>
		<clock_policy>
			<auto_boost>{clock_policy__auto_boost}</auto_boost>
			<auto_boost_default>{clock_policy__auto_boost_default}</auto_boost_default>
		</clock_policy>
		<fabric>
			<state>{fabric__state}</state>
			<status>{fabric__status}</status>
			<cliqueId>{fabric__cliqueId}</cliqueId>
			<clusterUuid>{fabric__clusterUuid}</clusterUuid>
			<health>
				<summary>{fabric__health__summary}</summary>
				<bandwidth>{fabric__health__bandwidth}</bandwidth>
				<route_recovery_in_progress>{fabric__health__route_recovery_in_progress}</route_recovery_in_progress>
				<route_unhealthy>{fabric__health__route_unhealthy}</route_unhealthy>
				<access_timeout_recovery>{fabric__health__access_timeout_recovery}</access_timeout_recovery>
				<incorrect_configuration>{fabric__health__incorrect_configuration}</incorrect_configuration>
				<partition_assigned>{fabric__health__partition_assigned}</partition_assigned>
			</health>
		</fabric>
		<supported_clocks>
{supported_clocks}
		</supported_clocks>
		<processes>
{processes}
		</processes>
		<accounted_processes>
		</accounted_processes>
		<capabilities>
			<egm>{capabilities__egm}</egm>
		</capabilities>
	</gpu>
"""

XML_BASE = {
    'product_name': 'NVIDIA H200',
    'product_brand': 'NVIDIA',
    'product_architecture': 'Hopper',
    'display_mode': 'Requested functionality has been deprecated',
    'display_attached': 'Yes',
    'display_active': 'Disabled',
    'persistence_mode': 'Enabled',
    'addressing_mode': 'None',
    'mig_mode__current_mig': 'Disabled',
    'mig_mode__pending_mig': 'Disabled',
    'accounting_mode': 'Disabled',
    'accounting_mode_buffer_size': '4000',
    'driver_model__current_dm': 'N/A',
    'driver_model__pending_dm': 'N/A',
    'serial': 'REDACTED',
    'uuid': 'GPU-REDACTED',
    'pdi': 'REDACTED',
    'minor_number': '0',
    'vbios_version': '96.00.A5.00.1A',
    'multigpu_board': 'No',
    'board_id': '0x6',
    'board_part_number': '692-2G520-0282-000',
    'gpu_part_number': '2335-895-A1',
    'gpu_fru_part_number': 'N/A',
    'platformInfo__chassis_serial_number': 'N/A',
    'platformInfo__slot_number': 'N/A',
    'platformInfo__tray_index': 'N/A',
    'platformInfo__host_id': 'N/A',
    'platformInfo__peer_type': 'N/A',
    'platformInfo__module_id': '2',
    'platformInfo__gpu_fabric_guid': 'N/A',
    'inforom_version__img_version': 'G520.0282.02.02',
    'inforom_version__oem_object': '2.1',
    'inforom_version__ecc_object': '7.16',
    'inforom_version__pwr_object': 'N/A',
    'inforom_bbx_flush__latest_timestamp': 'N/A',
    'inforom_bbx_flush__latest_duration': 'N/A',
    'gpu_operation_mode__current_gom': 'N/A',
    'gpu_operation_mode__pending_gom': 'N/A',
    'gpu_virtualization_mode__virtualization_mode': 'Pass-Through',
    'gpu_virtualization_mode__host_vgpu_mode': 'N/A',
    'gpu_virtualization_mode__vgpu_heterogeneous_mode': 'N/A',
    'gpu_recovery_action': 'None',
    'gsp_firmware_version': '580.159.04',
    'ibmnpu__relaxed_ordering_mode': 'N/A',
    'pci__pci_bus': '00',
    'pci__pci_device': '06',
    'pci__pci_domain': '0000',
    'pci__pci_base_class': '3',
    'pci__pci_sub_class': '2',
    'pci__pci_device_id': '233510DE',
    'pci__pci_bus_id': '00000000:00:06.0',
    'pci__pci_sub_system_id': '18BF10DE',
    'pci__pci_gpu_link_info__pcie_gen__max_link_gen': '5',
    'pci__pci_gpu_link_info__pcie_gen__current_link_gen': '5',
    'pci__pci_gpu_link_info__pcie_gen__device_current_link_gen': '5',
    'pci__pci_gpu_link_info__pcie_gen__max_device_link_gen': '5',
    'pci__pci_gpu_link_info__pcie_gen__max_host_link_gen': 'N/A',
    'pci__pci_gpu_link_info__link_widths__max_link_width': '16x',
    'pci__pci_gpu_link_info__link_widths__current_link_width': '16x',
    'pci__pci_bridge_chip__bridge_chip_type': 'N/A',
    'pci__pci_bridge_chip__bridge_chip_fw': 'N/A',
    'pci__replay_counter': '0',
    'pci__replay_rollover_counter': '0',
    'pci__tx_util': '1054 KB/s',
    'pci__rx_util': '608 KB/s',
    'pci__atomic_caps_outbound': 'N/A',
    'pci__atomic_caps_inbound': 'N/A',
    'fan_speed': 'N/A',
    'performance_state': 'P0',
    'clocks_event_reasons__clocks_event_reason_gpu_idle': 'Active',
    'clocks_event_reasons__clocks_event_reason_applications_clocks_setting': 'Not Active',
    'clocks_event_reasons__clocks_event_reason_sw_power_cap': 'Not Active',
    'clocks_event_reasons__clocks_event_reason_hw_slowdown': 'Not Active',
    'clocks_event_reasons__clocks_event_reason_hw_thermal_slowdown': 'Not Active',
    'clocks_event_reasons__clocks_event_reason_hw_power_brake_slowdown': 'Not Active',
    'clocks_event_reasons__clocks_event_reason_sync_boost': 'Not Active',
    'clocks_event_reasons__clocks_event_reason_sw_thermal_slowdown': 'Not Active',
    'clocks_event_reasons__clocks_event_reason_display_clocks_setting': 'Not Active',
    'clocks_event_reasons_counters__clocks_event_reasons_counters_sw_power_cap': '0 us',
    'clocks_event_reasons_counters__clocks_event_reasons_counters_sync_boost': '0 us',
    'clocks_event_reasons_counters__clocks_event_reasons_counters_sw_therm_slowdown': '0 us',
    'clocks_event_reasons_counters__clocks_event_reasons_counters_hw_therm_slowdown': '0 us',
    'clocks_event_reasons_counters__clocks_event_reasons_counters_hw_power_brake': '0 us',
    'sparse_operation_mode': 'Disabled',
    'fb_memory_usage__total': '143771 MiB',
    'fb_memory_usage__reserved': '616 MiB',
    'fb_memory_usage__used': '0 MiB',
    'fb_memory_usage__free': '143156 MiB',
    'total': '262144 MiB',
    'used': '1 MiB',
    'free': '262143 MiB',
    'cc_protected_memory_usage__total': '0 MiB',
    'cc_protected_memory_usage__used': '0 MiB',
    'cc_protected_memory_usage__free': '0 MiB',
    'compute_mode': 'Default',
    'utilization__gpu_util': '0 %',
    'utilization__memory_util': '0 %',
    'utilization__encoder_util': '0 %',
    'utilization__decoder_util': '0 %',
    'utilization__jpeg_util': '0 %',
    'utilization__ofa_util': '0 %',
    'encoder_stats__session_count': '0',
    'encoder_stats__average_fps': '0',
    'encoder_stats__average_latency': '0',
    'fbc_stats__session_count': '0',
    'fbc_stats__average_fps': '0',
    'fbc_stats__average_latency': '0',
    'dram_encryption_mode__current_dram_encryption': 'N/A',
    'dram_encryption_mode__pending_dram_encryption': 'N/A',
    'ecc_mode__current_ecc': 'Enabled',
    'ecc_mode__pending_ecc': 'Enabled',
    'ecc_errors__volatile__sram_correctable': '0',
    'ecc_errors__volatile__sram_uncorrectable_parity': '0',
    'ecc_errors__volatile__sram_uncorrectable_secded': '0',
    'ecc_errors__volatile__dram_correctable': '0',
    'ecc_errors__volatile__dram_uncorrectable': '0',
    'ecc_errors__aggregate__sram_correctable': '0',
    'ecc_errors__aggregate__sram_uncorrectable_parity': '0',
    'ecc_errors__aggregate__sram_uncorrectable_secded': '0',
    'ecc_errors__aggregate__dram_correctable': '0',
    'ecc_errors__aggregate__dram_uncorrectable': '0',
    'ecc_errors__aggregate__sram_threshold_exceeded': 'No',
    'ecc_errors__aggregate_uncorrectable_sram_sources__sram_sm': '0',
    'ecc_errors__aggregate_uncorrectable_sram_sources__sram_microcontroller': '0',
    'ecc_errors__aggregate_uncorrectable_sram_sources__sram_pcie': '0',
    'ecc_errors__aggregate_uncorrectable_sram_sources__sram_other': '0',
    'ecc_errors__channel_repair_pending': 'No',
    'ecc_errors__tpc_repair_pending': 'No',
    'ecc_errors__unrepairable_memory': 'No',
    'retired_pages__multiple_single_bit_retirement__retired_count': 'N/A',
    'retired_pages__multiple_single_bit_retirement__retired_pagelist': 'N/A',
    'retired_pages__double_bit_retirement__retired_count': 'N/A',
    'retired_pages__double_bit_retirement__retired_pagelist': 'N/A',
    'retired_pages__pending_blacklist': 'N/A',
    'retired_pages__pending_retirement': 'N/A',
    'remapped_rows__remapped_row_corr': '0',
    'remapped_rows__remapped_row_corr_inactive': '0',
    'remapped_rows__remapped_row_unc': '0',
    'remapped_rows__remapped_row_unc_inactive': '0',
    'remapped_rows__remapped_row_pending': 'No',
    'remapped_rows__remapped_row_failure': 'No',
    'remapped_rows__row_remapper_histogram__row_remapper_histogram_max': '3072 bank(s)',
    'remapped_rows__row_remapper_histogram__row_remapper_histogram_high': '0 bank(s)',
    'remapped_rows__row_remapper_histogram__row_remapper_histogram_partial': '0 bank(s)',
    'remapped_rows__row_remapper_histogram__row_remapper_histogram_low': '0 bank(s)',
    'remapped_rows__row_remapper_histogram__row_remapper_histogram_none': '0 bank(s)',
    'temperature__gpu_temp': '37 C',
    'temperature__gpu_temp_tlimit': '50 C',
    'temperature__gpu_temp_max_tlimit_threshold': '-8 C',
    'temperature__gpu_temp_slow_tlimit_threshold': '-2 C',
    'temperature__gpu_temp_max_gpu_tlimit_threshold': '0 C',
    'temperature__gpu_target_temperature': 'N/A',
    'temperature__memory_temp': '37 C',
    'temperature__gpu_temp_max_mem_tlimit_threshold': '0 C',
    'supported_gpu_target_temp__gpu_target_temp_min': 'N/A',
    'supported_gpu_target_temp__gpu_target_temp_max': 'N/A',
    'gpu_power_readings__power_state': 'P0',
    'gpu_power_readings__average_power_draw': '87.92 W',
    'gpu_power_readings__instant_power_draw': '79.81 W',
    'gpu_power_readings__current_power_limit': '700.00 W',
    'gpu_power_readings__requested_power_limit': '700.00 W',
    'gpu_power_readings__default_power_limit': '700.00 W',
    'gpu_power_readings__min_power_limit': '200.00 W',
    'gpu_power_readings__max_power_limit': '700.00 W',
    'gpu_memory_power_readings__average_power_draw': '52.65 W',
    'gpu_memory_power_readings__instant_power_draw': 'N/A',
    'module_power_readings__power_state': 'P0',
    'module_power_readings__average_power_draw': 'N/A',
    'module_power_readings__instant_power_draw': 'N/A',
    'module_power_readings__current_power_limit': 'N/A',
    'module_power_readings__requested_power_limit': 'N/A',
    'module_power_readings__default_power_limit': 'N/A',
    'module_power_readings__min_power_limit': 'N/A',
    'module_power_readings__max_power_limit': 'N/A',
    'power_smoothing': 'N/A',
    'power_profiles__power_profile_requested_profiles': 'N/A',
    'power_profiles__power_profile_enforced_profiles': 'N/A',
    'clocks__graphics_clock': '345 MHz',
    'clocks__sm_clock': '345 MHz',
    'clocks__mem_clock': '3201 MHz',
    'clocks__video_clock': '765 MHz',
    'applications_clocks__graphics_clock': '1980 MHz',
    'applications_clocks__mem_clock': '3201 MHz',
    'default_applications_clocks__graphics_clock': '1980 MHz',
    'default_applications_clocks__mem_clock': '3201 MHz',
    'deferred_clocks__mem_clock': 'N/A',
    'max_clocks__graphics_clock': '1980 MHz',
    'max_clocks__sm_clock': '1980 MHz',
    'max_clocks__mem_clock': '3201 MHz',
    'max_clocks__video_clock': '1545 MHz',
    'max_customer_boost_clocks__graphics_clock': '1980 MHz',
    'clock_policy__auto_boost': 'N/A',
    'clock_policy__auto_boost_default': 'N/A',
    'fabric__state': 'Completed',
    'fabric__status': 'Success',
    'fabric__cliqueId': '0',
    'fabric__clusterUuid': '00000000-0000-0000-0000-000000000000',
    'fabric__health__summary': 'N/A',
    'fabric__health__bandwidth': 'N/A',
    'fabric__health__route_recovery_in_progress': 'N/A',
    'fabric__health__route_unhealthy': 'N/A',
    'fabric__health__access_timeout_recovery': 'N/A',
    'fabric__health__incorrect_configuration': 'N/A',
    'fabric__health__partition_assigned': 'N/A',
    'capabilities__egm': 'disabled',
}
