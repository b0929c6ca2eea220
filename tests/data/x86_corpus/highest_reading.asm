section .rodata
    sensors dd s_boiler, s_pump, s_tank
    s_boiler db "boiler", 0
    s_pump   db "pump", 0
    s_tank   db "tank", 0
section .data
    max_val dd -1
    max_idx dd 0
section .text
    mov esi, 0
read_next:
    push dword [sensors + esi*4]
    call read_sensor
    cmp eax, [max_val]
    jle not_higher
    mov [max_val], eax
    mov [max_idx], esi
not_higher:
    inc esi
    cmp esi, 3
    jl read_next

    mov edi, [max_idx]
    push dword [sensors + edi*4]
    cmp dword [max_val], 40
    setg al                       ; alarm when the highest reading is over 40
    movzx eax, al
    push eax
    call set_alarm
