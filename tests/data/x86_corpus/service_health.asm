; page on-call for every unhealthy service and log which ones failed
section .rodata
    names    dd web, database, cache
    web      db "web", 0
    database db "db", 0
    cache   db "cache", 0
    healthy db "ok", 0
section .data
    failed_mask dd 0
section .text
    xor esi, esi
check:
    push dword [names + esi*4]
    call get_status
    cmp eax, healthy
    je fine
    push dword [names + esi*4]
    call page_oncall
    mov ecx, esi
    mov ebx, 1
    shl ebx, cl                   ; bit for this service
    or [failed_mask], ebx
fine:
    inc esi
    cmp esi, 3
    jne check
    cmp dword [failed_mask], 0
    je all_ok
    push dword [failed_mask]
    call log_mask
all_ok:
    hlt
