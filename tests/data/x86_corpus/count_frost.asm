; how many cities are below zero?
section .rodata
    cities dd oslo, paris, helsinki, rome
    oslo     db "Oslo", 0
    paris    db "Paris", 0
    helsinki db "Helsinki", 0
    rome     db "Rome", 0
    zero     dd 0.0
section .data
    cold dd 0
section .text
_start:
    mov ecx, 4
.city:
    push ecx
    push dword [cities + ecx*4 - 4]
    call get_temperature
    movd xmm0, eax
    comiss xmm0, [zero]
    jae .not_cold
    inc dword [cold]
.not_cold:
    pop ecx
    loop .city
    push dword [cold]
    call report_count
    hlt
